package metrics

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// oracleAddLogitRow is AddLogitRow and RefRow.Set's statistics written the
// straightforward way: one loop over the elements, every accumulator
// updated per element.
func oracleAddLogitRow(cand, refRow []float32, accs ...*LogitStats) {
	var ref struct {
		nan, inf int
		sumSq    float64
	}
	for _, v := range refRow {
		switch f := float64(v); {
		case math.IsNaN(f):
			ref.nan++
		case math.IsInf(f, 0):
			ref.inf++
		default:
			ref.sumSq += float64(f * f)
		}
	}
	candNaN, candInf := 0, 0
	for _, v := range cand {
		switch a := float64(v); {
		case math.IsNaN(a):
			candNaN++
		case math.IsInf(a, 0):
			candInf++
		}
	}
	finite := candNaN+candInf+ref.nan+ref.inf == 0
	for _, s := range accs {
		s.rows++
		s.candNaN, s.candInf, s.refNaN, s.refInf = s.candNaN+candNaN, s.candInf+candInf, s.refNaN+ref.nan, s.refInf+ref.inf
		if !finite {
			s.skipped++
		}
	}
	if !finite {
		return
	}
	var dot, na float64
	for i, a := range cand {
		b := refRow[i]
		d := a - b
		dd, aa, ad := float64(d*d), float64(a*a), math.Abs(float64(d))
		for _, s := range accs {
			s.sumSqDiff += dd
			s.sumSqCand += aa
			s.maxAbsDiff = max(s.maxAbsDiff, ad)
		}
		dot += float64(float64(a) * float64(b))
		na += float64(float64(a) * float64(a))
	}
	var cos float64
	switch nb := ref.sumSq; {
	case na == 0 && nb == 0:
		cos = 1
	case na == 0 || nb == 0:
		cos = 0
	default:
		cos = dot / (math.Sqrt(na) * math.Sqrt(nb))
	}
	top, refTop := oracleTopK(cand, 5), oracleTopK(refRow, 5)
	overlap := 0
	for _, i := range top {
		for _, j := range refTop {
			if i == j {
				overlap++
			}
		}
	}
	for _, s := range accs {
		if s.rows-s.skipped == 1 || cos < s.cosMin {
			s.cosMin = cos
		}
		s.cosSum += cos
		s.top5Sum += float64(overlap) / float64(len(top))
		if top[0] == refTop[0] {
			s.top1Same++
		}
	}
}

// oracleTopK is topK by sorting: indices by value, largest first, ties
// to the lower index.
func oracleTopK(row []float32, k int) []int {
	var out []int
	for range min(k, len(row)) {
		best := -1
		for i, v := range row {
			taken := false
			for _, j := range out {
				taken = taken || i == j
			}
			if !taken && (best < 0 || v > row[best]) {
				best = i
			}
		}
		out = append(out, best)
	}
	return out
}

// LogitStats accumulated through AddLogitRow (one accumulator, or a run's
// and a prompt's at once) hold the oracle's bits, rows with NaN and
// infinities included.
func TestAddLogitRowMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 3, 5, 6, 100, llama3Vocab} {
		var got, gotPrompt, want, wantPrompt LogitStats
		for row := range 6 {
			ref, cand := make([]float32, n), make([]float32, n)
			for i := range ref {
				ref[i] = float32(rng.NormFloat64() * 5)
				cand[i] = ref[i] + float32(rng.NormFloat64()*0.01*float64(row))
			}
			switch {
			case row == 2 && n > 4:
				cand[n-2] = float32(math.NaN())
			case row == 3 && n > 4:
				ref[1] = float32(math.Inf(1))
			case row == 4 && n > 4:
				cand[3] = cand[1] // a tie in the top 5
			}
			var rr RefRow
			rr.Set(ref)
			accs := []*LogitStats{&got}
			oracle := []*LogitStats{&want}
			if row%2 == 1 {
				accs, oracle = append(accs, &gotPrompt), append(oracle, &wantPrompt)
			}
			if err := AddLogitRow(cand, &rr, accs...); err != nil {
				t.Fatal(err)
			}
			oracleAddLogitRow(cand, ref, oracle...)
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
