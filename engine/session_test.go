package engine

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func p3Tokens(t *testing.T) []int32 {
	return loadLogitsGolden(t, "p3", "F32").TokenIDs
}

// TestThreadCountDoesNotChangeLogits: logits are bit-identical for any
// number of threads, in both numerics.
func TestThreadCountDoesNotChangeLogits(t *testing.T) {
	everyOpOnThePool(t)
	ids := p3Tokens(t)
	for _, c := range []struct {
		variant  string
		numerics Numerics
	}{{"F32", Exact}, {"Q8_0", GGML}, {"Q4_0", Exact}} {
		var ref [][]float32
		threadCounts := []int{1, 2, 3, 7}
		if testing.Short() {
			threadCounts = []int{1, 3} // under qemu: one pool against none, with ranges of unequal size
		}
		for _, threads := range threadCounts {
			m := openModel(t, modelPath(c.variant), c.numerics, threads)
			got := decodeAll(t, m, ids)
			if ref == nil {
				ref = got
				continue
			}
			requireSameBits(t, fmt.Sprintf("%s/%s: threads %d", c.variant, c.numerics, threads), "with 1 thread", got, ref)
		}
	}
}

// requireSameBits stops the test at the first logit of got whose bits
// differ from ref's (what: the run, refName: the reference run).
func requireSameBits(t *testing.T, what, refName string, got, ref [][]float32) {
	t.Helper()
	for i := range got {
		for j := range got[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(ref[i][j]) {
				t.Fatalf("%s: row %d logit %d = %v, %s %v", what, i, j, got[i][j], refName, ref[i][j])
			}
		}
	}
}

// everyOpOnThePool puts every matmul, attention and row-wise op of a batch
// on the pool, however small the model, until the test ends.
func everyOpOnThePool(t *testing.T) {
	macs, bytes, rows := parallelMin, parallelMinBytes, rowParallelMin
	t.Cleanup(func() { parallelMin, parallelMinBytes, rowParallelMin = macs, bytes, rows })
	parallelMin, parallelMinBytes, rowParallelMin = 0, 0, 0
}

// decodeChunks feeds ids in chunks of the given sizes and collects every row.
func decodeChunks(t *testing.T, s *Session, ids []int32, sizes ...int) [][]float32 {
	t.Helper()
	var rows [][]float32
	for _, n := range sizes {
		chunk := ids[:n]
		ids = ids[n:]
		if err := s.Decode(chunk, nil, func(i int, l []float32) error {
			rows = append(rows, slices.Clone(l))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

func maxAbsDiff(a, b [][]float32) float64 {
	var d float64
	for i := range a {
		for j := range a[i] {
			d = max(d, math.Abs(float64(a[i][j])-float64(b[i][j])))
		}
	}
	return d
}

// TestSessionBatching: like llama.cpp, a batch of >= 2 rows uses other
// kernels (tinyBLAS) than a single row (vec_dot), so token-by-token decoding
// agrees with one batch to rounding only; any split into batches of >= 2
// rows is bit-identical. Truncate and Reset rewind the KV cache.
func TestSessionBatching(t *testing.T) {
	ids := loadLogitsGolden(t, "p2", "F32").TokenIDs
	for _, c := range []struct {
		variant  string
		numerics Numerics
		tol      float64
	}{{"F32", Exact, 1e-4}, {"F32", GGML, 1e-4}, {"Q8_0", GGML, 0.5}} {
		m := openModel(t, modelPath(c.variant), c.numerics, 2)
		whole := decodeAll(t, m, ids)

		ones := make([]int, len(ids))
		for i := range ones {
			ones[i] = 1
		}
		s := m.NewSession(64)
		d := maxAbsDiff(whole, decodeChunks(t, s, ids, ones...))
		t.Logf("%s/%s: token by token vs one batch: max|Δ| %.3e", c.variant, c.numerics, d)
		if d > c.tol {
			t.Errorf("%s/%s: token by token differs from one batch by %g", c.variant, c.numerics, d)
		}
		s.Reset()
		if s.Pos() != 0 {
			t.Fatalf("Pos after Reset = %d", s.Pos())
		}
		if d := maxAbsDiff(whole, decodeChunks(t, s, ids, 5, len(ids)-5)); d != 0 {
			t.Errorf("%s/%s: two chunks differ from one batch by %g", c.variant, c.numerics, d)
		}
		if s.Pos() != len(ids) {
			t.Fatalf("Pos = %d, want %d", s.Pos(), len(ids))
		}

		// Rewind to 7 and decode a different continuation, then the
		// original one again: it must reproduce rows 7.. exactly.
		s.Truncate(7)
		if s.Pos() != 7 {
			t.Fatalf("Pos after Truncate(7) = %d", s.Pos())
		}
		decodeChunks(t, s, []int32{5, 6, 7}, 3)
		s.Truncate(7)
		again := decodeChunks(t, s, ids[7:], len(ids)-7)
		if d := maxAbsDiff(whole[7:], again); d != 0 {
			t.Errorf("%s/%s: re-decoding after Truncate differs by %g", c.variant, c.numerics, d)
		}
		s.Truncate(100) // beyond the end: no-op
		if s.Pos() != len(ids) {
			t.Errorf("Truncate beyond the end moved Pos to %d", s.Pos())
		}
	}
}

// TestDecodeWantSelectsRows: only requested rows are emitted, in order, and
// equal the rows of a full decode (the last layer's FFN runs on them only).
func TestDecodeWantSelectsRows(t *testing.T) {
	ids := loadLogitsGolden(t, "p2", "F32").TokenIDs
	m := openModel(t, modelPath("F16"), GGML, 2)
	whole := decodeAll(t, m, ids)
	s := m.NewSession(0)
	var got []int
	err := s.Decode(ids, func(i int) bool { return i%4 == 1 }, func(i int, l []float32) error {
		got = append(got, i)
		if !slices.Equal(l, whole[i]) {
			t.Errorf("row %d differs from the full decode", i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{1, 5, 9}) {
		t.Errorf("emitted rows %v, want [1 5 9]", got)
	}
	// No rows wanted: the cache still advances and later rows are right.
	s.Reset()
	if err := s.Decode(ids[:6], func(int) bool { return false }, nil); err != nil {
		t.Fatal(err)
	}
	rest := decodeChunks(t, s, ids[6:], len(ids)-6)
	if d := maxAbsDiff(whole[6:], rest); d != 0 {
		t.Errorf("rows after a logits-free prefix differ by %g", d)
	}
}

func TestDecodeErrors(t *testing.T) {
	m := openModel(t, modelPath("F32"), Exact, 1)
	s := m.NewSession(8)
	emit := func(int, []float32) error { return nil }
	if err := s.Decode([]int32{1, 2, 512}, nil, emit); err == nil || !strings.Contains(err.Error(), "token 512 (batch index 2)") {
		t.Errorf("out-of-range token: err = %v", err)
	}
	if err := s.Decode([]int32{1, -1}, nil, emit); err == nil || !strings.Contains(err.Error(), "token -1") {
		t.Errorf("negative token: err = %v", err)
	}
	if s.Pos() != 0 {
		t.Fatalf("failed decodes moved Pos to %d", s.Pos())
	}
	if err := s.Decode(make([]int32, 6), nil, emit); err != nil {
		t.Fatal(err)
	}
	err := s.Decode(make([]int32, 3), nil, emit)
	if err == nil || !strings.Contains(err.Error(), "exceed the context of 8") {
		t.Errorf("context overflow: err = %v", err)
	}
	if s.Pos() != 6 {
		t.Errorf("Pos after overflow = %d, want 6", s.Pos())
	}
}

// TestLayerHook: the hook sees every layer's residual stream, all rows in
// every layer but the last, which keeps the wanted rows; the last layer's
// rows through the output norm and matmul are the emitted logits, bit for bit.
func TestLayerHook(t *testing.T) {
	ids := loadLogitsGolden(t, "p2", "F32").TokenIDs
	m := openModel(t, modelPath("F32"), Exact, 2)
	c := m.Config
	s := m.NewSession(0)
	want := func(i int) bool { return i == 2 || i == len(ids)-1 }
	last := map[int][]float32{}
	layers := 0
	s.SetLayerHook(func(il int, rows []int, x []float32) {
		if il != layers {
			t.Fatalf("layer %d after layer %d", il, layers-1)
		}
		layers++
		if len(x) != len(rows)*c.NEmbd {
			t.Fatalf("layer %d: %d values for %d rows", il, len(x), len(rows))
		}
		if il < c.NLayer-1 {
			if len(rows) != len(ids) || rows[3] != 3 {
				t.Fatalf("layer %d rows %v, want all %d", il, rows, len(ids))
			}
			return
		}
		if !slices.Equal(rows, []int{2, len(ids) - 1}) {
			t.Fatalf("last layer rows %v", rows)
		}
		for r, i := range rows {
			last[i] = slices.Clone(x[r*c.NEmbd : (r+1)*c.NEmbd])
		}
	})
	err := s.Decode(ids, want, func(i int, logits []float32) error {
		xn := make([]float32, c.NEmbd)
		rmsNorm(xn, last[i], m.outputNorm, c.RMSEps)
		op := m.outputOp(1)
		got := make([]float32, op.N)
		if err := m.mm.MatMul(&op, xn, got); err != nil {
			return err
		}
		if !slices.Equal(got, logits) {
			t.Errorf("row %d: logits from the hooked last layer differ from Decode's", i)
		}
		return nil
	})
	if err != nil || layers != c.NLayer {
		t.Fatalf("%v; %d layers hooked, want %d", err, layers, c.NLayer)
	}
	s.SetLayerHook(nil)
	if err := s.Decode(ids[:1], nil, func(int, []float32) error { return nil }); err != nil || layers != c.NLayer {
		t.Errorf("a removed hook still ran (%d calls) or %v", layers, err)
	}
}

// TestArenaKeepsAPrefillBatch: the buffers of a batch as large as a
// 512-token prefill of a 1B model come from the block the session keeps
// (fresh ones cost clearing and garbage collection: 14 % of a 128-token
// prefill), and what exceeds arenaMax is allocated per call.
func TestArenaKeepsAPrefillBatch(t *testing.T) {
	var a arena
	batch := func(sizes ...int) (fromBlock []bool) {
		a.reset()
		for _, n := range sizes {
			b := a.alloc(n)
			start := uintptr(unsafe.Pointer(unsafe.SliceData(a.block)))
			p := uintptr(unsafe.Pointer(&b[0]))
			in := p >= start && p < start+uintptr(4*len(a.block))
			fromBlock = append(fromBlock, in)
		}
		return fromBlock
	}
	prefill := []int{512 * 2048, 512 * 8192, 512 * 8192, 512 * 2048} // x, gate, up, down
	batch(prefill...)
	if got := batch(prefill...); !slices.Equal(got, []bool{true, true, true, true}) {
		t.Fatalf("second batch from the block: %v, want every buffer", got)
	}
	// All-row logits of a 128k vocabulary do not fit: the block stops at
	// arenaMax and the rest is allocated per call.
	big := []int{arenaMax / 2, 512 * 128256}
	batch(big...)
	got := batch(big...)
	if len(a.block) != arenaMax {
		t.Fatalf("block of %d floats after a batch beyond arenaMax, want %d", len(a.block), arenaMax)
	}
	if !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("from the block: %v, want the first buffer only", got)
	}
}
