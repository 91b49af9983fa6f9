package ggml

import "sync"

// An f16 KV cache is read in place: ScoreRowsF16 and WeightedColumnsF16
// are ScoreRows and WeightedColumns over binary16 rows, bit-identical to
// them over the rows converted to float32 (the conversion is exact), so
// the cache need not be converted whole at every decode step.

// f16Rows is a kernel set that reads binary16 rows itself.
type f16Rows interface {
	scoreRowsF16(k []uint16, stride int, q []float32, out []float32)
	weightedColumnsF16(v []uint16, stride int, p []float32, lanes int, out []float32)
}

// ScoreRowsF16 sets out[j] = kern's ScoreRows of the binary16 row
// k[j*stride:j*stride+len(q)] (as float32) with q.
func ScoreRowsF16(kern Kernels, k []uint16, stride int, q []float32, out []float32) {
	checkRows("ScoreRowsF16", len(k), stride, len(q), len(out))
	if len(out) == 0 {
		return
	}
	if f, ok := kern.(f16Rows); ok {
		f.scoreRowsF16(k, stride, q, out)
		return
	}
	scoreRowsF16Generic(kern, k, stride, q, out)
}

// scoreRowsF16Generic is ScoreRowsF16 one converted row at a time.
func scoreRowsF16Generic(kern Kernels, k []uint16, stride int, q []float32, out []float32) {
	buf := getScratch(len(q))
	defer scratchPool.Put(buf)
	row := *buf
	for j := range out {
		F16sToF32(row, k[j*stride:j*stride+len(q)])
		kern.ScoreRows(row, len(q), q, out[j:j+1])
	}
}

// WeightedColumnsF16 is kern's WeightedColumns over binary16 rows of v.
func WeightedColumnsF16(kern Kernels, v []uint16, stride int, p []float32, lanes int, out []float32) {
	checkRows("WeightedColumnsF16", len(v), stride, len(out), len(p))
	checkLanes(lanes)
	if f, ok := kern.(f16Rows); ok {
		f.weightedColumnsF16(v, stride, p, lanes, out)
		return
	}
	weightedColumnsF16Generic(kern, v, stride, p, lanes, out)
}

// weightedColumnsF16Generic is WeightedColumnsF16 on the rows converted.
func weightedColumnsF16Generic(kern Kernels, v []uint16, stride int, p []float32, lanes int, out []float32) {
	d := len(out)
	buf := getScratch(len(p) * d)
	defer scratchPool.Put(buf)
	rows := *buf
	for j := range p {
		F16sToF32(rows[j*d:(j+1)*d], v[j*stride:j*stride+d])
	}
	kern.WeightedColumns(rows, d, p, lanes, out)
}

// scratchPool recycles the kernels' float32 scratch buffers (getScratch).
var scratchPool sync.Pool // *[]float32

// getScratch returns a buffer of n floats from scratchPool (put it back
// when done); its contents are undefined.
func getScratch(n int) *[]float32 {
	if p, ok := scratchPool.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}
