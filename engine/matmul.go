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
// in a fixed order, so results are identical for any thread count.
func NewCPUMatMul(numerics Numerics, pool *Pool) MatMuler {
	if pool == nil {
		pool = NewPool(1)
	}
	return &cpuMatMul{numerics: numerics, pool: pool}
}

type cpuMatMul struct {
	numerics Numerics
	pool     *Pool
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
	switch {
	case w.Type == ggml.F32:
		c.matMulF32(run, op, f32View(w.Data), x, out)
		return nil
	case c.numerics == GGML:
		return c.matMulGGML(run, op, x, out)
	default:
		return c.matMulExact(run, op, x, out)
	}
}

// matMulF32 is the F32-weight case, the same in both numerics: llama.cpp's
// vec_dot_type for F32 is F32.
func (c *cpuMatMul) matMulF32(run func(int, func(lo, hi int)), op *MatMulOp, w, x, out []float32) {
	K, N, T := op.K, op.N, op.T
	run(N, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			row := w[n*K : (n+1)*K]
			for t := 0; t < T; t++ {
				out[t*N+n] = ggml.DotF32(row, x[t*K:(t+1)*K])
			}
		}
	})
}

// matMulExact dequantizes each weight row once per call and dots it with every
// activation row; ggml guarantees DotRow(t, w, x) == DotF32(dequantize(w), x).
func (c *cpuMatMul) matMulExact(run func(int, func(lo, hi int)), op *MatMulOp, x, out []float32) error {
	w := op.Weight
	K, N, T := op.K, op.N, op.T
	var errOnce firstError
	run(N, func(lo, hi int) {
		if T == 1 {
			for n := lo; n < hi; n++ {
				out[n] = ggml.DotRow(w.Type, w.Row(n), x[:K])
			}
			return
		}
		row := make([]float32, K)
		for n := lo; n < hi; n++ {
			if err := ggml.Dequantize(w.Type, w.Row(n), row); err != nil {
				errOnce.set(fmt.Errorf("matmul %s: weight %s row %d: %w", op.Name, w.Name, n, err))
				return
			}
			for t := 0; t < T; t++ {
				out[t*N+n] = ggml.DotF32(row, x[t*K:(t+1)*K])
			}
		}
	})
	return errOnce.err
}

// matMulGGML converts each activation row once to the weight's vec_dot_type,
// as ggml_compute_forward_mul_mat does, then uses ggml's vec_dot.
func (c *cpuMatMul) matMulGGML(run func(int, func(lo, hi int)), op *MatMulOp, x, out []float32) error {
	w := op.Weight
	K, N, T := op.K, op.N, op.T
	qb, err := ggml.RowBytes(ggml.VecDotType(w.Type), K)
	if err != nil {
		return fmt.Errorf("matmul %s: activations for weight %s (%s): %w", op.Name, w.Name, w.Type, err)
	}
	xq := make([]byte, T*qb)
	var errOnce firstError
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
	run(N, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			row := w.Row(n)
			for t := 0; t < T; t++ {
				out[t*N+n] = ggml.VecDot(w.Type, row, xq[t*qb:(t+1)*qb], K)
			}
		}
	})
	return nil
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
