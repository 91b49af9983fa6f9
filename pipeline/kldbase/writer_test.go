package kldbase

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/evalrun/evalrun/pipeline/metrics"
)

// Round trip: decode every record of the plain base file and write the
// log-probs back through the Writer as logits (log-softmax of log-probs is
// the same distribution). The records cannot come back byte-identical:
//   - min_log_prob is re-normalised: it moves by L = log Σ exp(b), the
//     decoded record's normalisation error (≤ ~1e-4), plus rounding;
//   - scale is recomputed from the decoded range, equal up to float
//     rounding;
//   - each q_i = nearest_int((b_i − mn)/scale) lands on the same step or
//     a neighbour (b_i carries the rounding of scale·q + min).
//
// The decoded b_i are within a float rounding (~1e-7) of the grid
// min + scale·q_i with steps of ~2.4e-4, so re-encoding them lands each q
// on the same integer: q must be identical, the decoded log-probs equal
// to the originals minus L within a small fraction of a step. Only the
// two float32 header fields of a record change (and not in every record).
func TestRoundTripPlainBase(t *testing.T) {
	src := openBase(t, baseFiles[0])
	path := filepath.Join(t.TempDir(), "roundtrip.kld")
	w, err := Create(path, src.NCtx(), src.NVocab(), src.Tokens())
	if err != nil {
		t.Fatal(err)
	}
	lp := make([]float32, src.NVocab())
	for c := range src.NChunk() {
		for k := range src.PerChunk() {
			if err := src.Record(c, k, lp); err != nil {
				t.Fatal(err)
			}
			if err := w.WriteRecord(lp); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dst := openBase(t, path)
	if dst.NCtx() != src.NCtx() || dst.NVocab() != src.NVocab() || dst.NChunk() != src.NChunk() {
		t.Fatalf("header %d/%d/%d, want %d/%d/%d", dst.NCtx(), dst.NVocab(), dst.NChunk(), src.NCtx(), src.NVocab(), src.NChunk())
	}
	hdrA, hdrB := make([]byte, src.recordsOffset), make([]byte, dst.recordsOffset)
	src.ra.ReadAt(hdrA, 0)
	dst.ra.ReadAt(hdrB, 0)
	if !bytes.Equal(hdrA, hdrB) {
		t.Fatalf("header and tokens are not byte-identical")
	}

	var a, b Record
	lpA, lpB := make([]float32, src.NVocab()), make([]float32, src.NVocab())
	identical, qOff := 0, 0
	maxQ, maxLP := 0, 0.0
	for c := range src.NChunk() {
		for k := range src.PerChunk() {
			rawA, _ := src.RawRecord(c, k, nil)
			rawB, _ := dst.RawRecord(c, k, nil)
			if bytes.Equal(rawA, rawB) {
				identical++
			}
			UnmarshalRecord(rawA, src.NVocab(), &a)
			UnmarshalRecord(rawB, dst.NVocab(), &b)
			if math.Abs(float64(b.Scale/a.Scale)-1) > 1e-6 {
				t.Fatalf("chunk %d pos %d: scale %g, was %g", c, k, b.Scale, a.Scale)
			}
			for i := range a.Q {
				d := int(a.Q[i]) - int(b.Q[i])
				if d != 0 {
					qOff++
				}
				maxQ = max(maxQ, abs(d))
			}
			a.Decode(lpA)
			b.Decode(lpB)
			var sum float64
			for _, v := range lpA {
				sum += math.Exp(float64(v))
			}
			shift := math.Log(sum)
			for i := range lpA {
				// The base's log-probs minus their normalisation error.
				want := float64(lpA[i]) - shift
				if a.Q[i] == 0 {
					continue // clamped: only "≤ min_log_prob" is known
				}
				maxLP = max(maxLP, math.Abs(float64(lpB[i])-want)/float64(a.Scale))
			}
		}
	}
	n := src.NChunk() * src.PerChunk()
	t.Logf("records byte-identical: %d of %d; q values off by one step: %d of %d; max |Δq| %d; max |Δ log p| %.3f steps",
		identical, n, qOff, n*src.NVocab(), maxQ, maxLP)
	if maxQ != 0 || maxLP > 0.1 {
		t.Errorf("round trip moved a q by %d steps, a log-prob by %.3f steps; want 0 and < 0.1", maxQ, maxLP)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// The llama.cpp encoding on a hand-computed row.
func TestEncodeHandComputed(t *testing.T) {
	// max 2, min 2−20 is clamped to mn = 2−16 = −14; scale = 16/65535.
	logits := []float32{2, 0, -18, -14, 1}
	var rec Record
	nll := Encode(logits, 1, &rec)
	wantScale := float32(16) / 65535
	if rec.Scale != wantScale {
		t.Errorf("scale %g, want %g", rec.Scale, wantScale)
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l - 2))
	}
	lse := math.Log(sum)
	if math.Abs(float64(rec.MinLogProb)-(-16-lse)) > 1e-6 {
		t.Errorf("min_log_prob %g, want %g", rec.MinLogProb, -16-lse)
	}
	// q = nearest((l − mn)·65535/16): 65535, 57343.125→57343, 0 (clamped),
	// 0 (l == mn is not > mn), 61439.0625→61439.
	want := []uint16{65535, 57343, 0, 0, 61439}
	for i := range want {
		if rec.Q[i] != want[i] {
			t.Errorf("q[%d] = %d, want %d", i, rec.Q[i], want[i])
		}
	}
	if math.Abs(nll-(2+lse-0)) > 1e-6 {
		t.Errorf("nll %g, want %g", nll, 2+lse)
	}

	// Equal logits: scale 0, every q 0, log p = −log n.
	Encode([]float32{3, 3, 3, 3}, 0, &rec)
	if rec.Scale != 0 || rec.Q[0] != 0 || rec.Q[3] != 0 || math.Abs(float64(rec.MinLogProb)+math.Log(4)) > 1e-6 {
		t.Errorf("flat row: scale %g, q %v, min_log_prob %g; want 0, zeros, −log 4", rec.Scale, rec.Q, rec.MinLogProb)
	}
}

// nearest_int rounds half to even through the 1.5·2²³ trick.
func TestNearestInt(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want int32
	}{{0, 0}, {0.49, 0}, {0.5, 0}, {1.5, 2}, {2.5, 2}, {3.5, 4}, {65534.5, 65534}, {65535.4, 65535}, {-1.5, -2}, {-0.5, 0}} {
		if got := nearestInt(c.in); got != c.want {
			t.Errorf("nearestInt(%g) = %d, want %d", c.in, got, c.want)
		}
	}
}

// Logits written to a base file and compared with themselves: what a
// --kl-divergence run of the base model against its own base file gives.
func TestWriterSameLogitsKLD(t *testing.T) {
	const nCtx, nVocab = 8, 50
	tokens := make([]int32, 3*nCtx+5) // 3 chunks; the 5 extra are dropped
	seed := uint32(1)
	next := func() float32 { // small LCG: deterministic pseudo-random logits
		seed = seed*1664525 + 1013904223
		return float32(seed>>8)/float32(1<<24)*15 - 10 // range < 16: no clamping
	}
	for i := range tokens {
		tokens[i] = int32(i*7) % nVocab
	}
	path := filepath.Join(t.TempDir(), "same.kld")
	w, err := Create(path, nCtx, nVocab, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if w.NChunk() != 3 || w.Records() != 9 {
		t.Fatalf("n_chunk %d, records %d; want 3, 9", w.NChunk(), w.Records())
	}
	var rows [][]float32
	for range w.Records() {
		row := make([]float32, nVocab)
		for i := range row {
			row[i] = next()
		}
		rows = append(rows, row)
		if err := w.WriteRecord(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteRecord(rows[0]); err == nil {
		t.Error("a record beyond n_chunk·PerChunk was accepted")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := FileSize(nCtx, nVocab, 3); st.Size() != want {
		t.Fatalf("file size %d, want %d", st.Size(), want)
	}
	r := openBase(t, path)
	var k metrics.KLD
	base := make([]float32, nVocab)
	for i, row := range rows {
		c, pos := i/r.PerChunk(), i%r.PerChunk()
		if err := r.Record(c, pos, base); err != nil {
			t.Fatal(err)
		}
		if err := k.Add(row, base, r.Target(c, pos)); err != nil {
			t.Fatal(err)
		}
	}
	res := k.Result()
	if res.SameTop.Value != 1 || math.Abs(res.KLD.Value) > 1e-4 || math.Abs(res.LnPPLRatio.Value) > 1e-4 {
		t.Errorf("same logits vs their base: same top %g, KLD %g, ln ratio %g; want 1, ≈0, ≈0", res.SameTop.Value, res.KLD.Value, res.LnPPLRatio.Value)
	}
	// The NLL Encode computes, as llama-perplexity does while it writes a
	// base file, gives the perplexity the KL statistics report for the rows.
	var sum float64
	var rec Record
	for i, row := range rows {
		sum += Encode(row, r.Target(i/r.PerChunk(), i%r.PerChunk()), &rec)
	}
	if a, b := math.Exp(sum/float64(len(rows))), res.PPLQ.Value; len(rows) != 9 || math.Abs(a/b-1) > 1e-6 {
		t.Errorf("Encode's perplexity %g over %d tokens, the statistics' %g", a, len(rows), b)
	}
}

func TestWriterRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.kld")
	if _, err := Create(path, 2, 10, make([]int32, 8)); err == nil {
		t.Error("n_ctx 2 accepted")
	}
	if _, err := Create(path, 4, 0, make([]int32, 8)); err == nil {
		t.Error("n_vocab 0 accepted")
	}
	if _, err := Create(path, 4, 10, make([]int32, 3)); err == nil {
		t.Error("fewer tokens than one chunk accepted")
	}
	if _, err := Create(path, 4, 10, []int32{1, 2, 10, 3}); err == nil {
		t.Error("token 10 of a 10-token vocabulary accepted")
	}
	w, err := Create(path, 4, 10, make([]int32, 8))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRecord(make([]float32, 9)); err == nil {
		t.Error("a 9-entry row for n_vocab 10 accepted")
	}
	if err := w.WriteRecord(make([]float32, 10)); err != nil {
		t.Fatal(err)
	}
	// 2 chunks × 1 record needed, 1 written: Close fails and leaves nothing.
	if err := w.Close(); err == nil {
		t.Error("Close with a missing record succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed Close left files: %v", entries)
	}
}
