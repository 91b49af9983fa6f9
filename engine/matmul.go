package engine

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/evalrun/evalrun/engine/ggml"
)

// Weight is a 2-D weight tensor: N rows of K elements each (ggml ne0=K,
// ne1=N), stored in the file's type.
type Weight struct {
	Name string
	Type ggml.Type
	K, N int
	Data []byte
}

// RowBytes is the size in bytes of one row of K elements.
func (w *Weight) RowBytes() int {
	n, _ := ggml.RowBytes(w.Type, w.K)
	return n
}

// Row returns the bytes of row n.
func (w *Weight) Row(n int) []byte {
	rb := w.RowBytes()
	return w.Data[n*rb : (n+1)*rb]
}

// MatMulOp is one weight matmul of the graph: out[t][n] = Σ_k W[n][k]·x[t][k]
// for T activation rows. Names follow llama.cpp's graph ("Qcur-3",
// "ffn_out-0", "result_output").
type MatMulOp struct {
	Name    string
	Layer   int // -1 for result_output
	T, K, N int
	Weight  *Weight
}

// MatMuler computes weight matmuls. x holds T rows of K values, out receives
// T rows of N values. Both are valid only during the call (a session reuses
// its activation buffers).
type MatMuler interface {
	MatMul(op *MatMulOp, x []float32, out []float32) error
}

// NewCPUMatMul returns the reference CPU matmul. Output rows (N) are split
// across the pool's threads and every dot product is computed by one thread
// in a fixed order, so results are identical for any thread count. kern
// computes the exact-numerics products (nil: ggml.Best()); every
// implementation gives the generic code's bits.
func NewCPUMatMul(numerics Numerics, pool *Pool, kern ggml.Kernels) MatMuler {
	if pool == nil {
		pool = NewPool(1)
	}
	if kern == nil {
		kern = ggml.Best()
	}
	c := &cpuMatMul{numerics: numerics, pool: pool, kern: kern}
	c.acts.New = func() any { return new(ggml.GGMLActivations) }
	return c
}

type cpuMatMul struct {
	numerics Numerics
	pool     *Pool
	kern     ggml.Kernels
	acts     sync.Pool // *ggml.GGMLActivations, reused across calls
}

// Small reports whether an op of macs multiply-adds that reads bytes of
// weights (or KV cache) runs on the calling goroutine rather than the pool:
// below about 1M multiply-adds of cached data the pool costs more than it
// saves and makes the time erratic (on a shared machine a worker preempted
// in the middle of its range holds the whole job up), while an op reading
// more than 256 KB is bound by memory, which one thread cannot saturate.
// The measurements behind both thresholds are in docs/design-notes.md
// (engine.Small). The NPU simulator uses it too (sim.Options.Small).
func Small(macs, bytes int) bool { return macs < parallelMin && bytes < parallelMinBytes }

// parallelMin and parallelMinBytes are Small's thresholds, variables so
// that the thread-count test can put every op on the pool.
var parallelMin, parallelMinBytes = 1 << 20, 256 << 10

func (c *cpuMatMul) MatMul(op *MatMulOp, x []float32, out []float32) error {
	return c.MatMulShared([]*MatMulOp{op}, x, [][]float32{out})
}

// sharedMatMuler computes several ops that read the same activations.
type sharedMatMuler interface {
	MatMulShared(ops []*MatMulOp, x []float32, outs [][]float32) error
}

// MatMulShared computes ops that read the same activations x (Q, K and V;
// gate and up), outs[i] receiving ops[i]'s, in one pool job over all their
// rows: one hand-over to the workers instead of one per op. Every output is
// computed as MatMul computes it.
func (c *cpuMatMul) MatMulShared(ops []*MatMulOp, x []float32, outs [][]float32) error {
	parts := make([]matMulPart, 0, len(ops))
	defer func() {
		for _, p := range parts {
			if p.acts != nil {
				c.acts.Put(p.acts)
			}
		}
	}()
	rows, work, bytes := 0, 0, 0
	var prepared []*ggml.GGMLActivations // the ops' converted activations so far
	for i, op := range ops {
		p, err := c.prepare(op, x, outs[i], prepared)
		if err != nil {
			return err
		}
		if p.acts != nil {
			prepared = append(prepared, p.acts)
		}
		p.base = rows
		parts = append(parts, p)
		rows += (p.n + 15) &^ 15 // each op's rows start a 16-row group
		work += op.T * op.N * op.K
		bytes += len(op.Weight.Data)
	}
	all := func(lo, hi int) {
		for _, p := range parts {
			if a, b := max(lo, p.base), min(hi, p.base+p.n); a < b {
				p.compute(a-p.base, b-p.base)
			}
		}
	}
	if Small(work, bytes) {
		all(0, rows)
		return nil
	}
	// Ranges of whole 16-row groups: the kernels' widest row blocks.
	c.pool.RunAligned(rows, 16, all)
	return nil
}

// matMulPart is one op ready to run: compute writes its outputs [lo, hi).
type matMulPart struct {
	base, n int
	compute func(lo, hi int)
	acts    *ggml.GGMLActivations // returned to the pool after the job
}

// prepare checks op against its weight and buffers and returns its part
// (n = 0: nothing to compute). prepared are activations already converted
// from the same x for the job's earlier ops.
func (c *cpuMatMul) prepare(op *MatMulOp, x, out []float32, prepared []*ggml.GGMLActivations) (matMulPart, error) {
	w := op.Weight
	if w == nil {
		return matMulPart{}, fmt.Errorf("matmul %s: no weight", op.Name)
	}
	if w.K != op.K || w.N != op.N {
		return matMulPart{}, fmt.Errorf("matmul %s: op shape K=%d N=%d but weight %s is K=%d N=%d", op.Name, op.K, op.N, w.Name, w.K, w.N)
	}
	rb, err := ggml.RowBytes(w.Type, w.K)
	if err != nil {
		return matMulPart{}, fmt.Errorf("matmul %s: weight %s: %w", op.Name, w.Name, err)
	}
	if len(w.Data) != rb*w.N {
		return matMulPart{}, fmt.Errorf("matmul %s: weight %s has %d bytes, want %d (%d rows of %d %s values)", op.Name, w.Name, len(w.Data), rb*w.N, w.N, w.K, w.Type)
	}
	if len(x) < op.T*op.K || len(out) < op.T*op.N {
		return matMulPart{}, fmt.Errorf("matmul %s: buffers too small: x %d < %d or out %d < %d", op.Name, len(x), op.T*op.K, len(out), op.T*op.N)
	}
	if op.T == 0 || op.N == 0 {
		return matMulPart{}, nil
	}
	if c.numerics == GGML {
		return c.prepareGGML(op, x, out, prepared)
	}
	if !ggml.Supported(w.Type) {
		return matMulPart{}, fmt.Errorf("matmul %s: weight %s: unsupported tensor type %s", op.Name, w.Name, w.Type)
	}
	K, N, T := op.K, op.N, op.T
	return matMulPart{n: N, compute: func(lo, hi int) {
		rows := w.Data[lo*rb : hi*rb]
		if T == 1 {
			c.kern.MatVec(w.Type, rows, x[:K], out[lo:hi])
		} else {
			c.kern.MatMul(w.Type, rows, hi-lo, x[:T*K], T, out[lo:], N)
		}
	}}, nil
}

// prepareGGML computes as ggml_compute_forward_mul_mat on an AVX-512 build:
// the activations are converted once to the weight's vec_dot_type, then
// every output uses the kernel llama.cpp picks (ggml.GGMLKernelFor). Ops
// of one job whose weights have the same type (Q, K and V; gate and up)
// share one conversion: it depends on x and the type alone, and it is
// serial work between the parallel ones.
func (c *cpuMatMul) prepareGGML(op *MatMulOp, x, out []float32, prepared []*ggml.GGMLActivations) (matMulPart, error) {
	w := op.Weight
	K, N, T := op.K, op.N, op.T
	kern := ggml.GGMLKernelFor(w.Type, T, K, N)
	rb := w.RowBytes()
	compute := func(a *ggml.GGMLActivations) func(lo, hi int) {
		return func(lo, hi int) { c.kern.MatMulGGML(kern, w.Type, w.Data[lo*rb:hi*rb], hi-lo, a, out[lo:], N) }
	}
	for _, a := range prepared {
		if a.Weight == w.Type && a.K == K && a.Rows == T {
			return matMulPart{n: N, compute: compute(a)}, nil
		}
	}
	a := c.acts.Get().(*ggml.GGMLActivations)
	if err := c.kern.PrepareGGML(w.Type, x[:T*K], T, a); err != nil {
		c.acts.Put(a)
		return matMulPart{}, fmt.Errorf("matmul %s: activations for weight %s (%s): %w", op.Name, w.Name, w.Type, err)
	}
	return matMulPart{n: N, acts: a, compute: compute(a)}, nil
}

// hostLittleEndian reports whether float32 bytes in memory are in GGUF order.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
