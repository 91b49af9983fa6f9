package engine

import (
	"math"

	"github.com/evalrun/evalrun/engine/cmath"
)

// The element-wise operations of the llama graph, written to round as
// ggml-cpu's scalar code does. float32(a*b) stops Go from fusing a*b+c into an
// FMA on architectures where it would.

// rmsNorm writes x·(1/sqrt(mean(x²)+eps))·w to dst, as
// ggml_compute_forward_rms_norm_f32 followed by the weight MUL: the squares
// are float, their sum is double, mean and scale are float.
func rmsNorm(dst, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := float32(1) / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		y := v * scale
		dst[i] = y * w[i]
	}
}

// ropeCache fills cs with (cos θ_i, sin θ_i) for i < nDims/2 at position pos,
// as ggml_rope_cache_init: θ starts at pos and is multiplied (in float) by
// thetaScale = base^(-2/nDims) for every pair; freqScale multiplies it.
func ropeCache(cs []float32, pos int, nDims int, thetaScale, freqScale float32) {
	theta := float32(pos)
	for i := 0; i < nDims; i += 2 {
		t := freqScale * theta
		cs[i] = cmath.Cosf(t)
		cs[i+1] = cmath.Sinf(t)
		theta *= thetaScale
	}
}

// ropeThetaScale is powf(freq_base, -2.0f/n_dims).
func ropeThetaScale(base float32, nDims int) float32 {
	return cmath.Powf(base, float32(-2)/float32(nDims))
}

// addTo adds src to dst element-wise (the residual connections).
func addTo(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}
