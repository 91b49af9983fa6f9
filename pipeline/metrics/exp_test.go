package metrics

import (
	"math"
	"math/rand/v2"
	"testing"
)

// expShifted must return math.Exp's bits for every argument: the vector
// kernel where it applies, math.Exp for the rest. Rows mix ordinary logits
// with the values that leave the kernel's range (NaN, infinities, under-
// and overflow, subnormal results) at every offset within a block of 8,
// and lengths that leave a tail.
func TestExpShiftedIsMathExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, -0.0,
		-708, 708, -708.5, 708.5, -709.8, 709.8, -745.2, -746, -1e30, 1e30, -740, 88.7, -103.9,
		math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32}
	for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 1000, 3*minExpPart + 5, llama3Vocab} {
		for _, shift := range []float64{0, 7.25, -3.5, 1e-9, 700} {
			src := make([]float32, n)
			for i := range src {
				switch rng.IntN(10) {
				case 0:
					src[i] = special[rng.IntN(len(special))]
				case 1:
					src[i] = float32(rng.Float64()*1600 - 800)
				default:
					src[i] = float32(rng.NormFloat64() * 4)
				}
			}
			dst := make([]float64, n)
			expShifted(dst, src, shift)
			for i, v := range src {
				want := math.Exp(float64(v) - shift)
				if math.Float64bits(dst[i]) != math.Float64bits(want) && !(math.IsNaN(want) && math.IsNaN(dst[i])) {
					t.Fatalf("n %d shift %g: exp(%g - shift) = %x, math.Exp %x", n, shift, v, math.Float64bits(dst[i]), math.Float64bits(want))
				}
			}
		}
	}
}

// Dense sweep of the kernel's whole range, with arguments near the
// rounding points of k = round(x·log2 e) where the reduction is most
// delicate.
func TestExpShiftedSweep(t *testing.T) {
	var src []float32
	for x := float32(expLo); x <= expHi; x += 0.0137 {
		src = append(src, x)
	}
	for k := -1020; k <= 1020; k++ {
		x := (float64(k) + 0.5) * math.Ln2
		for d := -4; d <= 4; d++ {
			src = append(src, math.Nextafter32(float32(x), float32(x)+float32(d)))
		}
	}
	dst := make([]float64, len(src))
	expShifted(dst, src, 0)
	for i, v := range src {
		if want := math.Exp(float64(v)); math.Float64bits(dst[i]) != math.Float64bits(want) {
			t.Fatalf("exp(%g) = %x, math.Exp %x", v, math.Float64bits(dst[i]), math.Float64bits(want))
		}
	}
}

// The vector kernel, where there is one, does whole blocks while they are
// in range and stops before the first block that is not.
func TestExpBlocksStopsOutOfRange(t *testing.T) {
	src := make([]float32, 64)
	for i := range src {
		src[i] = float32(i%17) - 8
	}
	dst := make([]float64, len(src))
	if expBlocks(dst, src, 0) == 0 {
		t.Skip("no vector exp kernel on this CPU")
	}
	if n := expBlocks(dst, src, 0); n != 64 {
		t.Fatalf("in range: %d elements done, want 64", n)
	}
	for _, bad := range []float32{float32(math.NaN()), expLo - 1, expHi + 1} {
		src[43] = bad
		if n := expBlocks(dst, src, 0); n != 40 {
			t.Errorf("with %g at index 43: %d elements done, want 40", bad, n)
		}
	}
}
