package metrics

import (
	"math/rand/v2"
	"testing"
)

// llama3Vocab is Llama 3's vocabulary size: the row length the host's
// per-row cost is measured at.
const llama3Vocab = 128256

// benchRows returns a reference row and a candidate row close to it, like
// a quantized backend's.
func benchRows(n int) (ref, cand []float32) {
	rng := rand.New(rand.NewPCG(1, 2))
	ref, cand = make([]float32, n), make([]float32, n)
	for i := range ref {
		ref[i] = float32(rng.NormFloat64() * 3)
		cand[i] = ref[i] + float32(rng.NormFloat64()*0.05)
	}
	return ref, cand
}

// BenchmarkRefRowSet is the reference's preparation, once per row.
func BenchmarkRefRowSet(b *testing.B) {
	ref, _ := benchRows(llama3Vocab)
	var r RefRow
	b.SetBytes(4 * llama3Vocab)
	for b.Loop() {
		r.Set(ref)
	}
}

// benchCandidate times compare, one candidate row against the prepared
// reference row.
func benchCandidate(b *testing.B, compare func(cand []float32, r *RefRow) error) {
	ref, cand := benchRows(llama3Vocab)
	var r RefRow
	r.Set(ref)
	b.SetBytes(4 * llama3Vocab)
	for b.Loop() {
		if err := compare(cand, &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLiveKLDRow is one candidate's KLD row against a prepared
// reference.
func BenchmarkLiveKLDRow(b *testing.B) {
	benchCandidate(b, func(cand []float32, r *RefRow) error {
		_, err := LiveKLDRow(cand, r, 7)
		return err
	})
}

// BenchmarkAddLogitRow is one candidate's logit statistics.
func BenchmarkAddLogitRow(b *testing.B) {
	var s LogitStats
	benchCandidate(b, func(cand []float32, r *RefRow) error { return AddLogitRow(cand, r, &s) })
}

// BenchmarkCompareLive is one candidate's logit statistics and KLD row in
// the host's one call.
func BenchmarkCompareLive(b *testing.B) {
	var s LogitStats
	benchCandidate(b, func(cand []float32, r *RefRow) error {
		_, err := CompareLive(cand, r, 7, &s)
		return err
	})
}

// BenchmarkCompareRow is a whole scored position as the host computes it
// for a run with two candidates: the reference prepared once, then each
// candidate's logit statistics and KLD row (one after the other here; the
// host compares them on a goroutine each).
func BenchmarkCompareRow(b *testing.B) {
	ref, cand := benchRows(llama3Vocab)
	var r RefRow
	var s [2]LogitStats
	var k [2]KLD
	b.SetBytes(4 * llama3Vocab)
	for b.Loop() {
		r.Set(ref)
		for c := range 2 {
			row, err := CompareLive(cand, &r, 7, &s[c])
			if err != nil {
				b.Fatal(err)
			}
			k[c].AddRow(row)
		}
	}
}
