//go:build amd64

package ggml

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestQ4_0TablesDecodeEveryScale: the table the AVX-512 Q4_0 matvec loads
// for a block is decodeQ4_0's output for that block's scale, for all 65536
// binary16 bit patterns (subnormals, both zeros, Inf and NaN included).
func TestQ4_0TablesDecodeEveryScale(t *testing.T) {
	tab := q4_0Tables()
	blk := make([]byte, 18)
	for q := range 16 {
		blk[2+q] = byte(q) // element q is the low nibble q
	}
	y := make([]float32, 32)
	for h := range 1 << 16 {
		binary.LittleEndian.PutUint16(blk, uint16(h))
		decodeQ4_0(blk, y)
		for q := range 16 {
			if got := tab[16*h+q]; math.Float32bits(got) != math.Float32bits(y[q]) {
				t.Fatalf("d=%#04x q=%d: table %v (%#08x), decodeQ4_0 %v (%#08x)",
					h, q, got, math.Float32bits(got), y[q], math.Float32bits(y[q]))
			}
		}
	}
}
