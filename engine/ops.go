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
	scaleRow(dst, x, w, rmsScale(sum, len(x), eps))
}

// rmsNormRows is rmsNorm of every row of x (rows of len(w) values) into
// dst's (dst may be x). Each row's sum of squares is a chain of dependent
// float64 adds, so four rows are summed together, each in its own order:
// the same bits as rmsNorm, about four times the throughput.
func rmsNormRows(dst, x, w []float32, eps float32) {
	n := len(w)
	rows := len(x) / n
	r := 0
	for ; r+4 <= rows; r += 4 {
		x0, x1, x2, x3 := x[r*n:(r+1)*n], x[(r+1)*n:(r+2)*n], x[(r+2)*n:(r+3)*n], x[(r+3)*n:(r+4)*n]
		var s0, s1, s2, s3 float64
		for i := range x0 {
			a, b, c, d := x0[i], x1[i], x2[i], x3[i]
			s0 += float64(a * a)
			s1 += float64(b * b)
			s2 += float64(c * c)
			s3 += float64(d * d)
		}
		for q, sum := range [4]float64{s0, s1, s2, s3} {
			scaleRow(dst[(r+q)*n:(r+q+1)*n], x[(r+q)*n:(r+q+1)*n], w, rmsScale(sum, n, eps))
		}
	}
	for ; r < rows; r++ {
		rmsNorm(dst[r*n:(r+1)*n], x[r*n:(r+1)*n], w, eps)
	}
}

// rmsScale is rmsNorm's 1/sqrt(mean+eps) of a row of n values whose
// squares sum to sum.
func rmsScale(sum float64, n int, eps float32) float32 {
	mean := float32(sum / float64(n))
	return float32(1) / float32(math.Sqrt(float64(mean+eps)))
}

// scaleRow writes x·scale·w to dst, rounded after each product.
func scaleRow(dst, x, w []float32, scale float32) {
	for i, v := range x {
		y := v * scale
		dst[i] = y * w[i]
	}
}

// ropeParams are the constants of ggml's ROPE for one model
// (ggml_compute_forward_rope_flt's op parameters).
type ropeParams struct {
	nDims      int
	thetaScale float32   // powf(freq_base, -2.0f/n_dims)
	freqScale  float32   // freq_scale
	factors    []float32 // freq_factors (rope_freqs.weight); nil: none
	extFactor  float32   // YaRN's ext_factor: 1 for YaRN, else 0
	mscale     float32   // attn_factor
	corr       [2]float32
	// extMscale is mscale with rope_yarn's magnitude correction for
	// ext_factor != 0 (the same for every pair and position).
	extMscale float32
}

// llama.cpp's default YaRN betas (yarn_beta_fast, yarn_beta_slow), which it
// uses for every architecture the engine computes.
const yarnBetaFast, yarnBetaSlow = 32, 1

func newRopeParams(c Config, factors []float32) ropeParams {
	p := ropeParams{nDims: c.RopeDim, thetaScale: ropeThetaScale(c.RopeBase, c.RopeDim), freqScale: c.RopeScale,
		factors: factors, mscale: c.RopeAttnFactor}
	if c.RopeScaling == "yarn" {
		p.extFactor = 1
	}
	p.corr = yarnCorrDims(c.RopeDim, c.RopeOrigCtx, c.RopeBase, yarnBetaFast, yarnBetaSlow)
	p.extMscale = p.mscale * fma32(0.1, cmath.Logf(1/p.freqScale), 1)
	return p
}

// cache fills cs with (cos θ_i, sin θ_i)·mscale for i < nDims/2 at
// position pos, as ggml_rope_cache_init and rope_yarn: θ starts at pos and
// is multiplied (in float) by thetaScale for every pair; a frequency factor
// divides it, freqScale multiplies it, and YaRN mixes the two by its ramp.
// The multiply-adds are fused where gcc fuses them in ggml-cpu (built for
// a CPU with FMA); without scaling and factors each step is the plain one.
func (p *ropeParams) cache(cs []float32, pos int) {
	theta := float32(pos)
	for i := 0; i < p.nDims; i += 2 {
		extrap := theta
		if p.factors != nil {
			extrap = theta / p.factors[i/2]
		}
		interp := p.freqScale * extrap
		t, mscale := interp, p.mscale
		if p.extFactor != 0 {
			mix := yarnRamp(p.corr[0], p.corr[1], i) * p.extFactor
			t = fma32(interp, 1-mix, float32(extrap*mix))
			mscale = p.extMscale
		}
		cs[i] = cmath.Cosf(t) * mscale
		cs[i+1] = cmath.Sinf(t) * mscale
		theta *= p.thetaScale
	}
}

// yarnRamp is rope_yarn_ramp: 1 below low, 0 above high, linear between.
func yarnRamp(low, high float32, i0 int) float32 {
	y := (float32(i0/2) - low) / max(0.001, high-low)
	return 1 - min(1, max(0, y))
}

// yarnCorrDims is ggml_rope_yarn_corr_dims: the first and last dimension
// pair the YaRN ramp blends.
func yarnCorrDims(nDims, nCtxOrig int, base, betaFast, betaSlow float32) [2]float32 {
	dim := func(nRot float32) float32 {
		return float32(float32(nDims)*cmath.Logf(float32(nCtxOrig)/(nRot*2*float32(math.Pi)))) / (2 * cmath.Logf(base))
	}
	start := float32(math.Floor(float64(dim(betaFast))))
	end := float32(math.Ceil(float64(dim(betaSlow))))
	return [2]float32{max(0, start), min(float32(nDims-1), end)}
}

// fma32 is a·b+c rounded once to float32 (C's fmaf): float64 holds a·b
// exactly, and the sum is rounded twice only where it lies within a
// float64 ulp of a float32 tie.
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// ropeThetaScale is powf(freq_base, -2.0f/n_dims).
func ropeThetaScale(base float32, nDims int) float32 {
	return cmath.Powf(base, float32(-2)/float32(nDims))
}

// scale multiplies x by s in place (ggml_scale without a bias).
func scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// addTo adds src to dst element-wise (the residual connections).
func addTo(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}
