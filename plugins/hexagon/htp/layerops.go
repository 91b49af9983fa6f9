package htp

import (
	"math"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
)

// The HTP's non-matmul ops (ops: layer). ggml-hexagon computes them with
// HVX on 128-byte vectors, 32 fp32 lanes; its exact instruction sequences
// (qf32 intermediates, its exp and reciprocal approximations) are not
// public, so the simulator's are documented choices that differ from the
// CPU's where an HVX kernel would:
//
//   - RMS_NORM: squares summed in fp32 in 32 lanes (element j in lane j%32),
//     lanes reduced pairwise; scale = 1/sqrt(mean+eps) in fp32; then the MUL
//     with the norm weight (the CPU sums in double).
//   - ROPE: x0·cos − x1·sin and x0·sin + x1·cos with every product rounded
//     (no fused multiply-add).
//   - ADD: fp32, as the CPU.
//   - SOFT_MAX: scaled scores, their max, exp(v−max) as the float32 of the
//     correctly rounded exp, the sum in 32 fp32 lanes, times 1/sum.
//   - SWIGLU: silu(g) = g/(1+exp(−g)) with that exp, times up.
//   - GEGLU: the tanh GELU of g in fp32 (the float32 of the correctly
//     rounded tanh; no fp16 table), times up.
type layerOps struct{ s *Session }

// LayerOps implements engine.LayerDevice: with ops: layer every layer's
// ops run on its session; nil leaves them to the CPU.
func (d *Device) LayerOps(il int) engine.LayerOps {
	if !d.layer || il < 0 || il >= len(d.layerSession) {
		return nil
	}
	return layerOps{d.layerSession[il]}
}

// sum32 adds v in 32 fp32 lanes and reduces them pairwise.
func sum32(v []float32, f func(x float32) float32) float32 {
	var l [32]float32
	for i, x := range v {
		l[i%32] += f(x)
	}
	for w := 16; w >= 1; w /= 2 {
		for i := range w {
			l[i] += l[i+w]
		}
	}
	return l[0]
}

func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

func (o layerOps) RMSNorm(dst, x, w []float32, eps float32) {
	o.s.add("RMS_NORM", 1)
	o.s.add("MUL", 1)
	sum := sum32(x, func(v float32) float32 { return v * v })
	mean := sum / float32(len(x))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		y := v * scale
		dst[i] = y * w[i]
	}
}

func (o layerOps) Rope(x, cs []float32, nDims int, neox bool) {
	o.s.add("ROPE", 1)
	ggml.RopePairs(x, cs, nDims, neox, func(x0, x1, c, s float32) (float32, float32) {
		return float32(x0*c) - float32(x1*s), float32(x0*s) + float32(x1*c)
	})
}

func (o layerOps) Add(dst, src []float32) {
	o.s.add("ADD", 1)
	for i, v := range src {
		dst[i] += v
	}
}

func (o layerOps) Softmax(p []float32, scale float32) {
	o.s.add("SOFT_MAX", 1)
	maxv := float32(math.Inf(-1))
	for i, v := range p {
		v *= scale
		p[i] = v
		maxv = max(maxv, v)
	}
	for i, v := range p {
		p[i] = expf(v - maxv)
	}
	inv := 1 / sum32(p, func(v float32) float32 { return v })
	for i := range p {
		p[i] *= inv
	}
}

func (o layerOps) Swiglu(dst, gate, up []float32) {
	o.s.add("SWIGLU", 1)
	for i, g := range gate {
		dst[i] = g / (1 + expf(-g)) * up[i]
	}
}

func (o layerOps) Geglu(dst, gate, up []float32) {
	o.s.add("GEGLU", 1)
	const a, k = float32(0.044715), float32(0.79788456080286535587989211986876)
	for i, g := range gate {
		t := float32(math.Tanh(float64(k * g * (1 + a*g*g))))
		dst[i] = 0.5 * g * (1 + t) * up[i]
	}
}
