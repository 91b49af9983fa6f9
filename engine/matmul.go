package engine

import (
	"encoding/binary"
	"fmt"
	"math"
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
// T rows of N values.
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
	return &cpuMatMul{numerics: numerics, pool: pool, kern: kern}
}

type cpuMatMul struct {
	numerics Numerics
	pool     *Pool
	kern     ggml.Kernels
}

// parallelMin is the number of multiply-adds below which a matmul runs on the
// calling goroutine: waking workers costs more than it saves.
const parallelMin = 1 << 15

func (c *cpuMatMul) MatMul(op *MatMulOp, x []float32, out []float32) error {
	w := op.Weight
	if w == nil {
		return fmt.Errorf("matmul %s: no weight", op.Name)
	}
	if w.K != op.K || w.N != op.N {
		return fmt.Errorf("matmul %s: op shape K=%d N=%d but weight %s is K=%d N=%d", op.Name, op.K, op.N, w.Name, w.K, w.N)
	}
	rb, err := ggml.RowBytes(w.Type, w.K)
	if err != nil {
		return fmt.Errorf("matmul %s: weight %s: %w", op.Name, w.Name, err)
	}
	if len(w.Data) != rb*w.N {
		return fmt.Errorf("matmul %s: weight %s has %d bytes, want %d (%d rows of %d %s values)", op.Name, w.Name, len(w.Data), rb*w.N, w.N, w.K, w.Type)
	}
	if len(x) < op.T*op.K || len(out) < op.T*op.N {
		return fmt.Errorf("matmul %s: buffers too small: x %d < %d or out %d < %d", op.Name, len(x), op.T*op.K, len(out), op.T*op.N)
	}
	if op.T == 0 || op.N == 0 {
		return nil
	}
	run := c.pool.Run
	if op.T*op.N*op.K < parallelMin {
		run = func(n int, fn func(lo, hi int)) { fn(0, n) }
	}
	if c.numerics == GGML {
		return c.matMulGGML(run, op, x, out)
	}
	if !ggml.Supported(w.Type) {
		return fmt.Errorf("matmul %s: weight %s: unsupported tensor type %s", op.Name, w.Name, w.Type)
	}
	K, N, T := op.K, op.N, op.T
	run(N, func(lo, hi int) {
		rows := w.Data[lo*rb : hi*rb]
		if T == 1 {
			c.kern.MatVec(w.Type, rows, x[:K], out[lo:hi])
		} else {
			c.kern.MatMul(w.Type, rows, hi-lo, x[:T*K], T, out[lo:], N)
		}
	})
	return nil
}

// matMulGGML computes as ggml_compute_forward_mul_mat on an AVX512 build:
// activations are converted once per row to the weight's vec_dot_type, then
// each output uses the kernel llama.cpp picks for it (see ggmlDot).
func (c *cpuMatMul) matMulGGML(run func(int, func(lo, hi int)), op *MatMulOp, x, out []float32) error {
	w := op.Weight
	K, N, T := op.K, op.N, op.T
	vt := ggml.VecDotType(w.Type)
	qb, err := ggml.RowBytes(vt, K)
	if err != nil {
		return fmt.Errorf("matmul %s: activations for weight %s (%s): %w", op.Name, w.Name, w.Type, err)
	}
	xq := make([]byte, T*qb)
	var errOnce firstError
	if vt != ggml.F32 {
		run(T, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				if err := ggml.QuantizeActivations(w.Type, x[t*K:(t+1)*K], xq[t*qb:(t+1)*qb]); err != nil {
					errOnce.set(fmt.Errorf("matmul %s: activations row %d for weight %s: %w", op.Name, t, w.Name, err))
					return
				}
			}
		})
		if errOnce.err != nil {
			return errOnce.err
		}
	}
	kernel := ggmlKernel(w.Type, T, K, N)
	var xf []float32 // the activations as the float kernels read them
	switch w.Type {
	case ggml.F32:
		xf = x[:T*K]
	case ggml.F16:
		xf = make([]float32, T*K)
		for i := range xf {
			xf[i] = ggml.F16ToF32(binary.LittleEndian.Uint16(xq[2*i:]))
		}
	}
	run(N, func(lo, hi int) {
		var wf []float32
		if xf != nil {
			wf = make([]float32, K)
		}
		for n := lo; n < hi; n++ {
			row := w.Row(n)
			if wf != nil {
				if err := ggml.Dequantize(w.Type, row, wf); err != nil {
					errOnce.set(fmt.Errorf("matmul %s: weight %s row %d: %w", op.Name, w.Name, n, err))
					return
				}
			}
			for t := 0; t < T; t++ {
				switch kernel {
				case kernelTinyBLAS:
					out[t*N+n] = ggml.TinyBLASDot(wf, xf[t*K:(t+1)*K])
				case kernelVecDotF32:
					out[t*N+n] = vecDotFloat(wf, xf[t*K:(t+1)*K], w.Type == ggml.F16)
				case kernelQ8_0:
					out[t*N+n] = ggml.VecDotQ8_0AVX(row, xq[t*qb:(t+1)*qb], K)
				case kernelQ4_0:
					out[t*N+n] = ggml.VecDotQ4_0AVX(row, xq[t*qb:(t+1)*qb], K)
				case kernelQ4_0x8:
					out[t*N+n] = ggml.VecDotQ4_0Repacked(row, xq[t*qb:(t+1)*qb], K)
				default:
					out[t*N+n] = ggml.VecDot(w.Type, row, xq[t*qb:(t+1)*qb], K)
				}
			}
		}
	})
	return errOnce.err
}

type ggmlKernelKind int

const (
	kernelGeneric   ggmlKernelKind = iota // ggml.VecDot
	kernelTinyBLAS                        // llamafile tinyBLAS<16> (F32, F16)
	kernelVecDotF32                       // ggml_vec_dot_f32 / _f16
	kernelQ8_0                            // AVX vec_dot_q8_0_q8_0 == tinyBLAS_Q0
	kernelQ4_0                            // AVX vec_dot_q4_0_q8_0 == tinyBLAS_Q0
	kernelQ4_0x8                          // repacked q4_0_8x8 gemv/gemm
)

// ggmlKernel is the kernel llama.cpp's CPU backend runs for a weight type,
// T activation rows, K inputs and N output rows: llamafile_sgemm takes
// batches of >= 2 rows, for F32/F16 only when its tinyBLAS<16> fits
// (K%16 == 0 and N%4 == 0, llamafile/sgemm.cpp tinyBLAS::matmul); otherwise
// the vec_dot loop runs. For the Q0 types both compute the same values.
// Q4_0 weights of a multiple of 8 rows are repacked to q4_0_8x8 at load
// (use_extra_bufts, on by default) and use its kernels at every T.
func ggmlKernel(t ggml.Type, T, K, N int) ggmlKernelKind {
	switch t {
	case ggml.F32, ggml.F16:
		if T >= 2 && K%16 == 0 && N%4 == 0 {
			return kernelTinyBLAS
		}
		return kernelVecDotF32
	case ggml.Q8_0:
		return kernelQ8_0
	case ggml.Q4_0:
		if N%8 == 0 {
			return kernelQ4_0x8
		}
		return kernelQ4_0
	}
	return kernelGeneric
}

// firstError keeps the first error reported by parallel workers.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (e *firstError) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

// hostLittleEndian reports whether float32 bytes in memory are in GGUF order.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// f32View returns little-endian float32 data as a []float32, without copying
// when the bytes are suitably aligned (GGUF tensor data always is).
func f32View(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	if hostLittleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// vecDotFloat is ggml_vec_dot_f32, or ggml_vec_dot_f16 for F16 weights.
func vecDotFloat(a, b []float32, f16 bool) float32 {
	if f16 {
		return ggml.VecDotF16(a, b)
	}
	return ggml.VecDotF32(a, b)
}
