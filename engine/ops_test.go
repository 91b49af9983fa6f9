package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRMSNormRowsIsRMSNorm: the four-rows-at-a-time norm gives every row
// rmsNorm's bits (each row's float64 sum in its own order), in place too,
// for row counts that are not multiples of four and values whose squares
// under- and overflow.
func TestRMSNormRowsIsRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 16, 64, 768} {
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		for _, rows := range []int{1, 3, 4, 5, 9} {
			x := make([]float32, rows*n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20)))
			}
			x[0], x[len(x)-1] = 3e38, 1e-45
			want := make([]float32, len(x))
			for r := range rows {
				rmsNorm(want[r*n:(r+1)*n], x[r*n:(r+1)*n], w, 1e-6)
			}
			got := make([]float32, len(x))
			rmsNormRows(got, x, w, 1e-6)
			rmsNormRows(x, x, w, 1e-6)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(x[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n %d rows %d: element %d = %v (in place %v), rmsNorm %v", n, rows, i, got[i], x[i], want[i])
				}
			}
		}
	}
}
