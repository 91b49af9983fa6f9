package cmath

import "math"

// Tanhf is the C library's tanhf as glibc builds it for x86-64 (the
// libm llama.cpp's CPU backend calls there): fdlibm's float tanh, from
// expm1f, each operation rounded to float32 with no fused multiply-add.
// It is computed here rather than called: gemma's soft caps take a tanh
// per attention score and per logit, and a call into libm (through purego)
// per element costs more than the model's own arithmetic (measured:
// docs/design-notes.md); and it gives the same bits on every architecture
// (aarch64's glibc fuses multiply-adds). TestTanhfIsLibms holds it to the
// loaded libm.
func Tanhf(x float32) float32 {
	bits := math.Float32bits(x)
	ix := bits & 0x7fffffff
	neg := bits&0x80000000 != 0
	var z float32
	switch {
	case ix >= 0x7f800000: // ±Inf: ±1; NaN: NaN
		if neg {
			return 1/x - 1
		}
		return 1/x + 1
	case ix >= 0x41b00000: // |x| >= 22: 1 - tiny rounds to 1
		z = 1
	case ix == 0:
		return x
	case ix < 0x24000000: // |x| < 2^-55
		return x * (1 + x)
	case ix >= 0x3f800000: // |x| >= 1
		t := expm1f(2 * abs32(x))
		z = 1 - 2/(t+2)
	default:
		t := expm1f(-2 * abs32(x))
		z = -t / (t + 2)
	}
	if neg {
		return -z
	}
	return z
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ 0x80000000) }

// withExp adds k to the exponent of y (SET_FLOAT_WORD(y, i+(k<<23))).
func withExp(y float32, k int32) float32 {
	return math.Float32frombits(uint32(int32(math.Float32bits(y)) + k<<23))
}

// expm1f is fdlibm's float expm1 (e^x - 1): reduction by k·ln2 in two
// parts, then a rational approximation on the remainder. Every product is
// converted to float32 on its own so that no architecture fuses it into
// an add.
func expm1f(x float32) float32 {
	const (
		oThreshold = float32(8.8721679688e+01)
		ln2Hi      = float32(6.9313812256e-01)
		ln2Lo      = float32(9.0580006145e-06)
		invLn2     = float32(1.4426950216e+00)
		q1         = float32(-3.3333335072e-02)
		q2         = float32(1.5873016091e-03)
		q3         = float32(-7.9365076090e-05)
		q4         = float32(4.0082177293e-06)
		q5         = float32(-2.0109921195e-07)
	)
	hx := math.Float32bits(x)
	neg := hx&0x80000000 != 0
	hx &= 0x7fffffff

	if hx >= 0x4195b844 { // |x| >= 27·ln2
		if hx >= 0x42b17218 { // |x| >= 88.72
			switch {
			case hx > 0x7f800000:
				return x + x // NaN
			case hx == 0x7f800000:
				if neg {
					return -1
				}
				return x
			case x > oThreshold:
				return float32(math.Inf(1))
			}
		}
		if neg {
			return -1 // tiny - 1 rounds to -1
		}
	}

	var hi, lo, c float32
	var k int32
	switch {
	case hx > 0x3eb17218: // |x| > ln2/2
		if hx < 0x3f851592 { // |x| < 1.5·ln2
			if !neg {
				hi, lo, k = x-ln2Hi, ln2Lo, 1
			} else {
				hi, lo, k = x+ln2Hi, -ln2Lo, -1
			}
		} else {
			half := float32(0.5)
			if neg {
				half = -0.5
			}
			k = int32(float32(invLn2*x) + half)
			t := float32(k)
			hi = x - float32(t*ln2Hi) // exact
			lo = float32(t * ln2Lo)
		}
		x = hi - lo
		c = (hi - x) - lo
	case hx < 0x33000000: // |x| < 2^-25
		return x
	}

	hfx := float32(0.5 * x)
	hxs := float32(x * hfx)
	p := q4 + float32(hxs*q5)
	p = q3 + float32(hxs*p)
	p = q2 + float32(hxs*p)
	p = q1 + float32(hxs*p)
	r1 := 1 + float32(hxs*p)
	t := 3 - float32(r1*hfx)
	e := float32(hxs * ((r1 - t) / (6 - float32(x*t))))
	if k == 0 {
		return x - (float32(x*e) - hxs)
	}
	e = float32(x*(e-c)) - c
	e -= hxs
	switch {
	case k == -1:
		return float32(0.5*(x-e)) - 0.5
	case k == 1:
		if x < -0.25 {
			return float32(-2 * (e - (x + 0.5)))
		}
		return 1 + float32(2*(x-e))
	case k <= -2 || k > 56:
		y := 1 - (e - x)
		return withExp(y, k) - 1
	case k < 23:
		t = math.Float32frombits(uint32(0x3f800000 - (0x1000000 >> k))) // 1 - 2^-k
		return withExp(t-(e-x), k)
	}
	t = math.Float32frombits(uint32((0x7f - k) << 23)) // 2^-k
	y := x - (e + t)
	y++
	return withExp(y, k)
}
