package ggml

import "fmt"

// A q8_0 KV cache is read in place too: ScoreRowsQ8_0 and
// WeightedColumnsQ8_0 are ScoreRows and WeightedColumns over rows of Q8_0
// blocks, bit-identical to them over the rows dequantized as Dequantize
// does (each value float32(q)·d, which is exact: an int8 times a binary16
// fits a float32's significand), so the cache need not be decoded whole at
// every decode step.

// q8Rows is a kernel set that reads Q8_0 rows itself.
type q8Rows interface {
	scoreRowsQ8_0(k []byte, stride int, q []float32, out []float32)
	weightedColumnsQ8_0(v []byte, stride int, p []float32, lanes int, out []float32)
}

// ScoreRowsQ8_0 sets out[j] = kern's ScoreRows of the dequantized Q8_0 row
// k[j*stride:j*stride+RowBytes(Q8_0, len(q))] with q; stride is in bytes
// and len(q) a multiple of 32.
func ScoreRowsQ8_0(kern Kernels, k []byte, stride int, q []float32, out []float32) {
	checkRows("ScoreRowsQ8_0", len(k), stride, q8RowBytes("ScoreRowsQ8_0", len(q)), len(out))
	if len(out) == 0 {
		return
	}
	if f, ok := kern.(q8Rows); ok {
		f.scoreRowsQ8_0(k, stride, q, out)
		return
	}
	buf := getScratch(len(q))
	defer scratchPool.Put(buf)
	row := *buf
	for j := range out {
		dequantQ8_0Row(k[j*stride:], row)
		kern.ScoreRows(row, len(q), q, out[j:j+1])
	}
}

// WeightedColumnsQ8_0 is kern's WeightedColumns over the dequantized Q8_0
// rows of v (len(out) values each, a multiple of 32; stride in bytes).
func WeightedColumnsQ8_0(kern Kernels, v []byte, stride int, p []float32, lanes int, out []float32) {
	checkRows("WeightedColumnsQ8_0", len(v), stride, q8RowBytes("WeightedColumnsQ8_0", len(out)), len(p))
	checkLanes(lanes)
	if f, ok := kern.(q8Rows); ok {
		f.weightedColumnsQ8_0(v, stride, p, lanes, out)
		return
	}
	d := len(out)
	buf := getScratch(len(p) * d)
	defer scratchPool.Put(buf)
	rows := *buf
	for j := range p {
		dequantQ8_0Row(v[j*stride:], rows[j*d:(j+1)*d])
	}
	kern.WeightedColumns(rows, d, p, lanes, out)
}

// q8RowBytes is the size of a Q8_0 row of n values; n not a multiple of 32
// panics.
func q8RowBytes(op string, n int) int {
	if n%32 != 0 {
		panic(fmt.Sprintf("ggml.%s: rows of %d values are not whole Q8_0 blocks of 32", op, n))
	}
	return n / 32 * 34
}

// dequantQ8_0Row decodes the len(y)/32 Q8_0 blocks at the start of src
// into y, as Dequantize does.
func dequantQ8_0Row(src []byte, y []float32) {
	for i := 0; i < len(y)/32; i++ {
		decodeQ8_0(src[34*i:34*i+34], y[32*i:32*i+32])
	}
}
