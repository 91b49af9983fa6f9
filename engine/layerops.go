package engine

import "github.com/evalrun/evalrun/engine/ggml"

// LayerOps computes the non-matmul ops of a transformer layer. The CPU's
// (the default) round as ggml-cpu does (ops.go); a device that runs whole
// layers supplies its own through LayerDevice. Calls for different heads of
// one batch may run concurrently.
type LayerOps interface {
	// RMSNorm is RMS_NORM followed by the MUL with the norm weight, one row.
	RMSNorm(dst, x, w []float32, eps float32)
	// Rope rotates the first nDims values of one head (ROPE).
	Rope(x, cs []float32, nDims int, neox bool)
	// Add is the residual ADD, one row: dst += src.
	Add(dst, src []float32)
	// Softmax is SOFT_MAX of one head's scores: p = softmax(scale·p).
	Softmax(p []float32, scale float32)
	// Swiglu is the FFN's GLU, one row: dst = silu(gate)·up.
	Swiglu(dst, gate, up []float32)
	// Geglu is gemma's GLU, one row: dst = gelu(gate)·up.
	Geglu(dst, gate, up []float32)
}

// rowsNormer is LayerOps that norm several rows in one call (the CPU's).
type rowsNormer interface {
	// RMSNormRows is RMSNorm of every row of x (rows of len(w) values).
	RMSNormRows(dst, x, w []float32, eps float32)
}

// normRows is lops.RMSNorm of every row of x (rows of len(w) values) into
// dst's, in one call where lops takes rows together.
func normRows(lops LayerOps, dst, x, w []float32, eps float32) {
	if r, ok := lops.(rowsNormer); ok {
		r.RMSNormRows(dst, x, w, eps)
		return
	}
	n := len(w)
	for i := 0; i < len(x); i += n {
		lops.RMSNorm(dst[i:i+n], x[i:i+n], w, eps)
	}
}

// LayerDevice is a matmul (attached with UseMatMul) that also runs the other
// ops of some layers: LayerOps(il) returns its ops for layer il, nil where
// the CPU's run.
type LayerDevice interface {
	LayerOps(il int) LayerOps
}

// cpuOps are the CPU's layer ops. exact (numerics: exact) computes GELU
// in f32 where ggml reads its fp16 table, as it keeps activations in f32.
type cpuOps struct {
	kern  ggml.Kernels
	exact bool
}

func (cpuOps) RMSNorm(dst, x, w []float32, eps float32)     { rmsNorm(dst, x, w, eps) }
func (cpuOps) RMSNormRows(dst, x, w []float32, eps float32) { rmsNormRows(dst, x, w, eps) }
func (c cpuOps) Rope(x, cs []float32, nDims int, neox bool) { c.kern.Rope(x, cs, nDims, neox) }
func (cpuOps) Add(dst, src []float32)                       { addTo(dst, src) }
func (c cpuOps) Softmax(p []float32, scale float32)         { c.kern.Softmax(p, scale) }
func (c cpuOps) Swiglu(dst, gate, up []float32)             { c.kern.Swiglu(dst, gate, up) }
func (c cpuOps) Geglu(dst, gate, up []float32) {
	if c.exact {
		ggml.GegluF32(dst, gate, up)
		return
	}
	ggml.Geglu(dst, gate, up)
}

// opsFor returns the ops layer il runs: the attached device's, else the
// CPU's.
func (m *Model) opsFor(il int) LayerOps {
	if d, ok := m.mm.(LayerDevice); ok {
		if ops := d.LayerOps(il); ops != nil {
			return ops
		}
	}
	return cpuOps{m.kern, m.numerics == Exact}
}
