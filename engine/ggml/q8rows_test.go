package ggml

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// randQ8_0Rows returns n rows of d values (whole Q8_0 blocks) stride bytes
// apart, the last one ending the buffer, with random quants (-128 too) and
// scales of every kind: random magnitudes of either sign, ±0, subnormal
// halves and the largest finite one.
func randQ8_0Rows(rng *rand.Rand, d, n, stride int) []byte {
	size := max(0, (n-1)*stride+d/32*34)
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	special := []uint16{0x0000, 0x8000, 0x0001, 0x83ff, 0x0200, 0x7bff, 0xfbff}
	for j := range n {
		for blk := range d / 32 {
			h := randScale(rng)
			if rng.IntN(8) == 0 {
				h = special[rng.IntN(len(special))]
			}
			o := j*stride + 34*blk
			b[o], b[o+1] = byte(h), byte(h>>8)
		}
	}
	return b
}

// TestQ8_0RowsAreTheDequantizedRows: every kernel set's ScoreRowsQ8_0 and
// WeightedColumnsQ8_0 over Q8_0 rows equal the generic ScoreRows and
// WeightedColumns over the same rows dequantized by Dequantize, bit for
// bit, for head sizes of one and more blocks (steps of 64 and a run of 32
// left over), strides of a head-major cache (the row itself) and longer
// ones, and rows that end at the buffer's end (the last row must not be
// read past).
func TestQ8_0RowsAreTheDequantizedRows(t *testing.T) {
	for _, k := range Available() {
		t.Run(k.Name(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(31, 32))
			for _, d := range []int{32, 64, 96, 128, 160, 256} {
				rb := d / 32 * 34
				for _, stride := range []int{rb, rb + 5, 3 * rb} {
					for _, n := range []int{0, 1, 5, 16, 63, 64, 65, 300} {
						rows := randQ8_0Rows(rng, d, n, stride)
						conv := make([]float32, n*d)
						for j := range n {
							if err := Dequantize(Q8_0, rows[j*stride:j*stride+rb], conv[j*d:(j+1)*d]); err != nil {
								t.Fatal(err)
							}
						}
						q := randVec(rng, d)
						want, got := make([]float32, n), make([]float32, n)
						Generic.ScoreRows(conv, d, q, want)
						ScoreRowsQ8_0(k, rows, stride, q, got)
						expectSame(t, fmt.Sprintf("ScoreRowsQ8_0 d=%d stride=%d n=%d", d, stride, n), want, got)

						p := randVec(rng, n)
						for _, lanes := range []int{16, 64} {
							want, got := make([]float32, d), make([]float32, d)
							Generic.WeightedColumns(conv, d, p, lanes, want)
							WeightedColumnsQ8_0(k, rows, stride, p, lanes, got)
							expectSame(t, fmt.Sprintf("WeightedColumnsQ8_0 lanes=%d d=%d stride=%d n=%d", lanes, d, stride, n), want, got)
						}
					}
				}
			}
		})
	}
}

// TestQ8_0RowsRefusePartialBlocks: rows that are not whole blocks panic.
func TestQ8_0RowsRefusePartialBlocks(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("ScoreRowsQ8_0 of rows of 48 values did not panic")
		}
	}()
	ScoreRowsQ8_0(Generic, make([]byte, 68), 68, make([]float32, 48), make([]float32, 1))
}
