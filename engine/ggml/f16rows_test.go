package ggml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestF16RowsAreTheConvertedRows: every kernel set's ScoreRowsF16 and
// WeightedColumnsF16 over binary16 rows equal the generic ScoreRows and
// WeightedColumns over the same rows converted to float32, bit for bit,
// for head sizes with every kind of leftover and rows that end at the
// buffer's end (the last row's tail must not be read past).
func TestF16RowsAreTheConvertedRows(t *testing.T) {
	for _, k := range Available() {
		t.Run(k.Name(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, 22))
			for _, d := range []int{1, 7, 8, 17, 24, 32, 40, 64, 100, 128, 256} {
				for _, n := range []int{0, 1, 5, 16, 63, 64, 65, 300} {
					stride := d + 5
					size := max(0, (n-1)*stride+d) // the last row ends the buffer
					half := make([]uint16, size)
					for i := range half {
						half[i] = F32ToF16(float32(rng.NormFloat64()))
					}
					conv := make([]float32, size)
					F16sToF32(conv, half)
					q := randVec(rng, d)
					want, got := make([]float32, n), make([]float32, n)
					Generic.ScoreRows(conv, stride, q, want)
					ScoreRowsF16(k, half, stride, q, got)
					expectSame(t, fmt.Sprintf("ScoreRowsF16 d=%d n=%d", d, n), want, got)

					p := randVec(rng, n)
					for _, lanes := range []int{16, 64} {
						want, got := make([]float32, d), make([]float32, d)
						Generic.WeightedColumns(conv, stride, p, lanes, want)
						WeightedColumnsF16(k, half, stride, p, lanes, got)
						expectSame(t, fmt.Sprintf("WeightedColumnsF16 lanes=%d d=%d n=%d", lanes, d, n), want, got)
					}
				}
			}
		})
	}
}
