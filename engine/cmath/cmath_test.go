package cmath

import (
	"math"
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
