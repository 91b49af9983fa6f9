package ggml

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/evalrun/evalrun/engine/cmath"
)

// tanhPaths are TanhInPlace's kernels that run on this machine.
func tanhPaths() map[string]func([]float32) {
	p := map[string]func([]float32){"generic": tanhGeneric, "TanhInPlace": TanhInPlace}
	if tanhFast != nil {
		p["simd"] = tanhFast
	}
	return p
}

// tanhSpecials: ±0, ±Inf, NaNs with several payloads, and every threshold
// of cmath's Tanhf and expm1f with its neighbours (expm1f's at twice the
// tanh input, so halved), both signs.
func tanhSpecials() []float32 {
	bits := []uint32{0, 0x7f800000, 0x7fc00000, 0x7f800001, 0x7fa00000, 0x7fbfffff, 0x7fc12345, 0x7fffffff, 0x00000001, 0x007fffff, 0x00800000}
	thresholds := []uint32{
		0x7f800000, 0x41b00000, 0x24000000, 0x3f800000, // Tanhf
		0x4195b844, 0x42b17218, 0x3eb17218, 0x3f851592, 0x33000000, // expm1f
		math.Float32bits(8.8721679688e+01), // oThreshold
	}
	for _, h := range thresholds {
		for _, b := range []uint32{h, h - 0x00800000} { // the threshold, half of it
			for d := -2; d <= 2; d++ {
				bits = append(bits, b+uint32(d))
			}
		}
	}
	var x []float32
	for _, b := range bits {
		x = append(x, math.Float32frombits(b), math.Float32frombits(b|0x80000000))
	}
	// Where expm1f's k = int32(invLn2·2x + 0.5) changes between its cases
	// (1/2, 2/3, 22/23, 56/57), a few ulps either side.
	for _, k := range []float64{2, 3, 23, 57} {
		b := math.Float32bits(float32((k - 0.5) / (2 * math.Log2E)))
		for d := -4; d <= 4; d++ {
			v := math.Float32frombits(b + uint32(d))
			x = append(x, v, -v)
		}
	}
	return x
}

func eqBits32(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// TestTanhInPlaceIsTanhf: every path equals cmath.Tanhf bit for bit (NaN
// payloads included) on the special values and a strided sweep over all
// bit patterns, in slices of every length 1..40 (the masked tail).
func TestTanhInPlaceIsTanhf(t *testing.T) {
	in := tanhSpecials()
	const stride = 1009 // about 4 million inputs
	for b := uint64(0); b < 1<<32; b += stride {
		in = append(in, math.Float32frombits(uint32(b)))
	}
	want := make([]float32, len(in))
	for i, x := range in {
		want[i] = cmath.Tanhf(x)
	}
	for name, f := range tanhPaths() {
		got := slices.Clone(in)
		n := 1
		for lo := 0; lo < len(got); lo += n {
			n = n%40 + 1
			f(got[lo:min(lo+n, len(got))])
		}
		bad := 0
		for i, x := range in {
			if !eqBits32(got[i], want[i]) {
				if bad++; bad <= 10 {
					t.Errorf("%s: tanh(%g = %#08x) = %#08x, want %#08x", name, x, math.Float32bits(x), math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d differ", name, bad, len(in))
		}
	}
}

// softCapScalar and gegluF32Scalar are SoftCap's and GegluF32's loops
// before TanhInPlace: one cmath.Tanhf per element.
func softCapScalar(x []float32, cap float32) {
	inv := 1 / cap
	for i, v := range x {
		x[i] = cmath.Tanhf(v*inv) * cap
	}
}

func gegluF32Scalar(dst, gate, up []float32) {
	up = up[:len(gate)]
	dst = dst[:len(gate)]
	for i, x := range gate {
		dst[i] = GeluF32(x) * up[i]
	}
}

func tanhTestData(n int, scale float64) []float32 {
	rng := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	sp := tanhSpecials()
	for i, v := range sp {
		x[(i*37)%n] = v
		x[(i*53+11)%n] = v * 30
	}
	return x
}

func TestSoftCapIsTheScalarLoop(t *testing.T) {
	for _, n := range []int{1, 15, 17, 1000, 3001} {
		x := tanhTestData(max(n, 400), 40)[:n]
		for _, c := range []float32{30, 50, 0.7} {
			want := slices.Clone(x)
			softCapScalar(want, c)
			got := slices.Clone(x)
			SoftCap(got, c)
			for i := range want {
				if !eqBits32(got[i], want[i]) {
					t.Fatalf("n %d cap %g: softcap(%g) = %#08x, want %#08x", n, c, x[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}

func TestGegluF32IsTheScalarLoop(t *testing.T) {
	for _, n := range []int{1, 15, 17, 256, 257, 1000} {
		gate := tanhTestData(max(n, 400), 4)[:n]
		up := tanhTestData(max(n, 400), 1)[:n]
		slices.Reverse(up)
		want := make([]float32, n)
		gegluF32Scalar(want, gate, up)
		got := make([]float32, n)
		GegluF32(got, gate, up)
		inPlace := slices.Clone(gate)
		GegluF32(inPlace, inPlace, up)
		for i := range want {
			if bothNaN(gate[i], up[i]) {
				// NaN·NaN keeps the NaN of whichever operand the compiled
				// multiply reads first, which Go may order either way
				// (arm64 under qemu picked the other one): any NaN.
				if got[i] == got[i] || inPlace[i] == inPlace[i] {
					t.Fatalf("n %d: geglu(NaN)·NaN = %g (in place %g), want NaN", n, got[i], inPlace[i])
				}
				continue
			}
			if !eqBits32(got[i], want[i]) || !eqBits32(inPlace[i], want[i]) {
				t.Fatalf("n %d: geglu(%g)·%g = %#08x (in place %#08x), want %#08x", n, gate[i], up[i], math.Float32bits(got[i]), math.Float32bits(inPlace[i]), math.Float32bits(want[i]))
			}
		}
	}
}

func bothNaN(a, b float32) bool { return a != a && b != b }

func BenchmarkTanhInPlace(b *testing.B) {
	src := tanhTestData(4096, 3)
	x := make([]float32, len(src))
	for name, f := range tanhPaths() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(4 * int64(len(x)))
			for b.Loop() {
				copy(x, src)
				f(x)
			}
		})
	}
}
