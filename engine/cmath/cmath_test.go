package cmath

import (
	"math"
	"runtime"
	"testing"
)

// The C library's functions and the Go stand-ins agree to within an ulp
// (they differ only where the C library is not correctly rounded), and the
// special values follow C.
func TestAgainstGo(t *testing.T) {
	t.Logf("source: %s", Source())
	ulp := func(a, b float32) int64 {
		d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
		if d < 0 {
			d = -d
		}
		return d
	}
	diffs := 0
	for i := 0; i < 200000; i++ {
		x := float32(i)*0.001 - 100
		for _, c := range []struct {
			name     string
			got, ref float32
		}{{"expf", Expf(x), goExpf(x)}, {"sinf", Sinf(x), goSinf(x)}, {"cosf", Cosf(x), goCosf(x)}, {"logf", Logf(x + 100.001), goLogf(x + 100.001)}} {
			if d := ulp(c.got, c.ref); d > 1 && !(math.IsInf(float64(c.ref), 0) || c.ref == 0) {
				t.Fatalf("%s(%v) = %v, Go %v: %d ulps apart", c.name, x, c.got, c.ref, d)
			} else if d == 1 {
				diffs++
			}
		}
	}
	t.Logf("results one ulp from the correctly rounded value: %d", diffs)
	if got := Expf(float32(math.Inf(-1))); got != 0 {
		t.Errorf("expf(-Inf) = %v", got)
	}
	if got := Powf(10000, -0.25); math.Abs(float64(got)-0.1) > 1e-6 {
		t.Errorf("powf(10000, -0.25) = %v", got)
	}
	if got := Cosf(0); got != 1 {
		t.Errorf("cosf(0) = %v", got)
	}
}

// TestTanhfIsLibms holds Tanhf to the C library's tanhf (on x86-64 Linux,
// glibc's: the one llama.cpp's ggml-cpu calls for TANH and for its GELU
// table) at every float of a stride through the whole range, the special
// values, and densely where the branches meet.
func TestTanhfIsLibms(t *testing.T) {
	// libm's tanhf is loaded for this comparison only.
	libmTanhf := func(x float32) float32 { load(); return fns.tanhf(x) }
	if Source() == "go" || runtime.GOARCH != "amd64" {
		t.Skipf("the C library's tanhf is not loaded here (%s, %s); Tanhf reproduces x86-64 glibc's", Source(), runtime.GOARCH)
	}
	check := func(x float32) {
		if got, want := Tanhf(x), libmTanhf(x); math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("Tanhf(%g) (%08x) = %g, libm %g", x, math.Float32bits(x), got, want)
		}
	}
	for _, x := range []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1, -1, 22, -22, 1e-20, 3e-39} {
		check(x)
	}
	stride := uint32(4099)
	if testing.Short() {
		stride = 65537
	}
	for b := uint32(0); b < 0x7f800000; b += stride {
		check(math.Float32frombits(b))
		check(-math.Float32frombits(b))
	}
	// Around the branch points of tanhf and expm1f (in 2x for tanh's
	// argument): 2^-55, 1, 22, ln2/2, 1.5·ln2, 27·ln2, 2^-25.
	for _, edge := range []uint32{0x24000000, 0x3f800000, 0x41b00000, 0x3e317218, 0x3f051592, 0x4115b844, 0x32800000} {
		for b := edge - 4096; b < edge+4096; b++ {
			check(math.Float32frombits(b))
			check(-math.Float32frombits(b))
		}
	}
	// Densely where soft caps and the GELU table evaluate it: |x| < 4.
	for b := uint32(0x3c000000); b < 0x40800000; b += 97 {
		check(math.Float32frombits(b))
	}
}
