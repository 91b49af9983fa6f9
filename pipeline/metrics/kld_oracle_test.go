package metrics

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// oracleLiveKLDRow is LiveKLDRow written the straightforward way: one
// math.Exp per term, inside the sums. The fast path (expShifted) must give
// the same bits.
func oracleLiveKLDRow(logits, ref []float32, tok int32) KLDRow {
	norm := func(l []float32) (imax int, norm float64) {
		for i, v := range l[1:] {
			if v > l[imax] {
				imax = i + 1
			}
		}
		m := float64(l[imax])
		var s float64
		for _, v := range l {
			s += math.Exp(float64(v) - m)
		}
		return imax, m + math.Log(s)
	}
	imaxRef, normRef := norm(ref)
	imax, normQ := norm(logits)
	var sum float64
	for i, rv := range ref {
		p := math.Exp(float64(rv) - normRef)
		if p == 0 {
			continue
		}
		lpRef := float64(rv) - normRef
		sum += float64(p * (lpRef - (float64(logits[i]) - normQ)))
	}
	nll := normQ - float64(logits[tok])
	nllBase := normRef - float64(ref[tok])
	return KLDRow{
		kld: sum, pDiff: float32(math.Exp(-nll) - math.Exp(-nllBase)), sameTop: imax == imaxRef,
		nll: nll, nll2: float64(nll * nll), nllBase: nllBase, nllBase2: float64(nllBase * nllBase), nllNLLBase: float64(nll * nllBase),
	}
}

func sameKLDRow(a, b KLDRow) bool {
	same := func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y)
	}
	return same(a.kld, b.kld) && same(float64(a.pDiff), float64(b.pDiff)) && a.sameTop == b.sameTop &&
		same(a.nll, b.nll) && same(a.nll2, b.nll2) && same(a.nllBase, b.nllBase) &&
		same(a.nllBase2, b.nllBase2) && same(a.nllNLLBase, b.nllNLLBase)
}

// Every KLD row the host computes is bit for bit the straightforward
// computation's, at a Llama-3 vocabulary and on small, wide-ranged and
// non-finite rows, with one RefRow shared by several candidates.
func TestLiveKLDRowMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 9, 100, 32000, llama3Vocab} {
		for trial := range 4 {
			ref := make([]float32, n)
			for i := range ref {
				ref[i] = float32(rng.NormFloat64() * float64(1+trial*trial*60)) // trial 3: logits 500 apart
			}
			if trial == 2 && n > 10 {
				ref[n/3] = float32(math.Inf(-1))
				ref[n/2] = float32(math.NaN())
			}
			var rr RefRow
			rr.Set(ref)
			for c := range 3 {
				cand := make([]float32, n)
				for i := range cand {
					cand[i] = ref[i] + float32(rng.NormFloat64()*0.1*float64(c))
				}
				tok := int32(rng.IntN(n))
				got, err := LiveKLDRow(cand, &rr, tok)
				if err != nil {
					t.Fatal(err)
				}
				if want := oracleLiveKLDRow(cand, ref, tok); !sameKLDRow(got, want) {
					t.Fatalf("n %d trial %d candidate %d: %+v, want %+v", n, trial, c, got, want)
				}
			}
		}
	}
}

// Candidates compared with one RefRow at once (the score pass does) get the
// bits they get one after the other; run with -race to see the sharing is
// safe.
func TestRefRowSharedByConcurrentCandidates(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n, cands = 20000, 4
	ref := make([]float32, n)
	for i := range ref {
		ref[i] = float32(rng.NormFloat64() * 4)
	}
	rows := make([][]float32, cands)
	for c := range rows {
		rows[c] = make([]float32, n)
		for i := range ref {
			rows[c][i] = ref[i] + float32(rng.NormFloat64()*0.1)
		}
	}
	var rr RefRow
	rr.Set(ref)
	got := make([]KLDRow, cands)
	var stats [cands]LogitStats
	var wg sync.WaitGroup
	for c := range cands {
		wg.Go(func() {
			got[c], _ = LiveKLDRow(rows[c], &rr, 11)
			_ = AddLogitRow(rows[c], &rr, &stats[c])
		})
	}
	wg.Wait()
	for c := range cands {
		if want := oracleLiveKLDRow(rows[c], ref, 11); !sameKLDRow(got[c], want) {
			t.Errorf("candidate %d: %+v, want %+v", c, got[c], want)
		}
		var want LogitStats
		oracleAddLogitRow(rows[c], ref, &want)
		if stats[c].Result() != want.Result() {
			t.Errorf("candidate %d: %+v, want %+v", c, stats[c].Result(), want.Result())
		}
	}
}

// CompareLive, the host's one call per candidate row, gives the bits of
// AddLogitRow's oracle and LiveKLDRow's oracle, with ties in the maximum,
// NaN and infinities on either side and one or two accumulators.
func TestCompareLiveMatchesOracles(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 2, 7, 100, 32000, llama3Vocab} {
		var got, gotPrompt, want, wantPrompt LogitStats
		for row := range 7 {
			ref, cand := make([]float32, n), make([]float32, n)
			for i := range ref {
				ref[i] = float32(rng.NormFloat64() * 4)
				cand[i] = ref[i] + float32(rng.NormFloat64()*0.05*float64(row))
			}
			switch {
			case row == 1 && n > 4: // the maximum twice: the first index is the argmax
				j := slices.Index(cand, slices.Max(cand))
				cand[n-1-j/2] = cand[j]
				ref[n-1] = slices.Max(ref)
			case row == 2 && n > 4:
				cand[n-2] = float32(math.NaN())
			case row == 3 && n > 4:
				ref[1] = float32(math.Inf(1))
			case row == 4 && n > 4:
				cand[1] = float32(math.NaN()) // among topK's first five: it stops the larger values below it
			case row == 5 && n > 4:
				cand[2] = float32(math.Inf(-1))
			}
			var rr RefRow
			rr.Set(ref)
			tok := int32(rng.IntN(n))
			accs, oracle := []*LogitStats{&got}, []*LogitStats{&want}
			if row%2 == 1 {
				accs, oracle = append(accs, &gotPrompt), append(oracle, &wantPrompt)
			}
			kld, err := CompareLive(cand, &rr, tok, accs...)
			if err != nil {
				t.Fatal(err)
			}
			oracleAddLogitRow(cand, ref, oracle...)
			if wantKLD := oracleLiveKLDRow(cand, ref, tok); !sameKLDRow(kld, wantKLD) {
				t.Fatalf("n %d row %d: %+v, want %+v", n, row, kld, wantKLD)
			}
		}
		for _, p := range [][2]*LogitStats{{&got, &want}, {&gotPrompt, &wantPrompt}} {
			a, _ := p[0].MarshalBinary()
			b, _ := p[1].MarshalBinary()
			if !bytes.Equal(a, b) {
				t.Fatalf("n %d: %+v, want %+v", n, p[0].Result(), p[1].Result())
			}
		}
	}
}

// A bad row or token is refused before anything is added.
func TestCompareLiveRefusesBadInput(t *testing.T) {
	var rr RefRow
	rr.Set([]float32{1, 2, 3})
	for _, c := range []struct {
		cand []float32
		tok  int32
		want string
	}{
		{[]float32{1, 2}, 0, "candidate row has 2 logits, reference row 3"},
		{[]float32{1, 2, 3}, 3, "token 3 outside the vocabulary of 3"},
		{[]float32{1, 2, 3}, -1, "token -1 outside"},
	} {
		var s LogitStats
		_, err := CompareLive(c.cand, &rr, c.tok, &s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v tok %d: %v, want %q", c.cand, c.tok, err, c.want)
		}
		if s.Result().Rows != 0 {
			t.Errorf("%v tok %d: a row was added", c.cand, c.tok)
		}
	}
}
