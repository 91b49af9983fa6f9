package metrics

import (
	"fmt"
	"math"
)

// LogitStats accumulates error statistics of candidate logit rows against
// reference rows of the same positions. The zero value is ready to use.
//
// A row pair in which either side holds a NaN or an infinity is counted
// (SkippedRows, and its non-finite elements in CandNaN/CandInf/RefNaN/RefInf)
// and left out of every other statistic, so that one broken row does not
// turn the NMSE, cosine and top-k figures into NaN.
type LogitStats struct {
	rows, skipped                    int
	candNaN, candInf, refNaN, refInf int
	sumSqDiff, sumSqCand             float64
	cosSum, cosMin                   float64
	maxAbsDiff                       float64
	top5Sum                          float64
	top1Same                         int
}

// LogitResult is the summary of LogitStats.
type LogitResult struct {
	Rows         int // row pairs added
	SkippedRows  int // row pairs with a NaN or Inf on either side
	ComparedRows int // Rows − SkippedRows: what the statistics below cover

	CandNaN, CandInf int // non-finite elements in candidate rows
	RefNaN, RefInf   int // non-finite elements in reference rows

	// NMSE is test-backend-ops' normalized mean squared error
	// Σ(a−b)²/Σa² with a = candidate and b = reference, over all elements of
	// the compared rows (each square in float, the sums in double).
	NMSE float64
	// Cosine similarity of each row pair (float64); rows where exactly one
	// side is all zeros count as 0, two all-zero rows as 1.
	CosMin, CosMean float64
	MaxAbsDiff      float64 // max |a_i − b_i|
	// Top5Overlap is the mean of |top5(a) ∩ top5(b)|/5 (top-k of min(5, n)
	// for tiny vocabularies); Top1Agree the fraction of rows whose argmax
	// (first index of the maximum) agrees.
	Top5Overlap, Top1Agree float64
}

// Add compares one candidate row with its reference row.
func (s *LogitStats) Add(cand, ref []float32) error {
	var r RefRow
	r.Set(ref)
	return AddLogitRow(cand, &r, s)
}

// AddLogitRow compares one candidate row with its prepared reference row
// and adds the result to every accumulator in accs (a run's and a
// prompt's): every accumulator sees the same additions in the same order
// as if it were the only one.
func AddLogitRow(cand []float32, ref *RefRow, accs ...*LogitStats) error {
	if err := checkStatsRow(cand, ref); err != nil {
		return err
	}
	newCandRow(cand).addStats(ref, accs, nil)
	return nil
}

// CompareLive is AddLogitRow into accs followed by LiveKLDRow, in fewer
// passes over the row (its top 5, its maximum and one pass for the
// statistics' sums and the softmax's): the bits of the two calls. On an
// error nothing is added.
func CompareLive(cand []float32, ref *RefRow, tok int32, accs ...*LogitStats) (KLDRow, error) {
	if err := checkStatsRow(cand, ref); err != nil {
		return KLDRow{}, err
	}
	if err := checkRow(cand, ref.Logits, tok); err != nil {
		return KLDRow{}, err
	}
	c := newCandRow(cand)
	var row KLDRow
	c.addStats(ref, accs, func(nan int, stats *rowStats) { row = c.kld(ref, tok, nan, stats) })
	return row, nil
}

func checkStatsRow(cand []float32, ref *RefRow) error {
	if len(cand) != len(ref.Logits) {
		return fmt.Errorf("metrics: candidate row has %d logits, reference row %d", len(cand), len(ref.Logits))
	}
	if len(cand) == 0 {
		return fmt.Errorf("metrics: empty logit row")
	}
	return nil
}

// addStats adds the row to accs. With kld non-nil it hands kld the row's
// NaN count and, when the statistics are computed (finite rows), the first
// accumulator's sums to gather in the softmax's pass.
func (c *candRow) addStats(ref *RefRow, accs []*LogitStats, kld func(nan int, stats *rowStats)) {
	cand := c.values
	candNaN, candInf := nonFinite(cand)
	finite := candNaN+candInf+ref.nan+ref.inf == 0
	for _, s := range accs {
		s.rows++
		s.candNaN, s.candInf, s.refNaN, s.refInf = s.candNaN+candNaN, s.candInf+candInf, s.refNaN+ref.nan, s.refInf+ref.inf
		if !finite {
			s.skipped++
		}
	}
	if finite || kld != nil {
		c.top = topK(cand, 5, c.top[:0])
	}
	if !finite || len(accs) == 0 {
		if kld != nil {
			kld(candNaN, nil)
		}
		return
	}
	// One pass per accumulator with its sums in registers (the same
	// additions in the same order as element by element into each); the
	// cosine's terms on the first.
	first := rowStats{sumSqDiff: accs[0].sumSqDiff, sumSqCand: accs[0].sumSqCand, maxAbsDiff: accs[0].maxAbsDiff}
	if kld != nil {
		kld(candNaN, &first)
	} else {
		first.pass(cand, ref.Logits, nil)
	}
	accs[0].sumSqDiff, accs[0].sumSqCand, accs[0].maxAbsDiff = first.sumSqDiff, first.sumSqCand, first.maxAbsDiff
	for _, s := range accs[1:] {
		st := rowStats{sumSqDiff: s.sumSqDiff, sumSqCand: s.sumSqCand, maxAbsDiff: s.maxAbsDiff}
		st.pass(cand, ref.Logits, nil)
		s.sumSqDiff, s.sumSqCand, s.maxAbsDiff = st.sumSqDiff, st.sumSqCand, st.maxAbsDiff
	}
	var cos float64
	switch na, nb := first.na, ref.sumSq; {
	case na == 0 && nb == 0:
		cos = 1
	case na == 0 || nb == 0:
		cos = 0
	default:
		cos = first.dot / (math.Sqrt(na) * math.Sqrt(nb))
	}
	top := c.top
	overlap := 0
	for _, i := range top {
		for _, j := range ref.top {
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
		if top[0] == ref.top[0] {
			s.top1Same++
		}
	}
}

// rowStats carries an accumulator's running sums through one row pair and
// gathers the row's cosine terms.
type rowStats struct {
	sumSqDiff, sumSqCand, maxAbsDiff float64
	dot, na                          float64
}

// pass runs over a finite row pair once, every sum in registers and in
// index order. With e non-nil (the candidate's exponentials) it also
// returns Σ e, the softmax's sum, as a chain of its own beside the others.
func (st *rowStats) pass(cand, ref []float32, e []float64) (sumExp float64) {
	sumSqDiff, sumSqCand, maxAbsDiff, dot, na := st.sumSqDiff, st.sumSqCand, st.maxAbsDiff, st.dot, st.na
	ref = ref[:len(cand)]
	if e == nil {
		for i, a := range cand {
			b := ref[i]
			d := a - b
			sumSqDiff += float64(d * d)
			sumSqCand += float64(a * a)
			if ad := math.Abs(float64(d)); ad > maxAbsDiff { // finite rows: max without NaN cases
				maxAbsDiff = ad
			}
			dot += float64(float64(a) * float64(b))
			na += float64(float64(a) * float64(a))
		}
	} else {
		e = e[:len(cand)]
		for i, a := range cand {
			b := ref[i]
			d := a - b
			sumSqDiff += float64(d * d)
			sumSqCand += float64(a * a)
			if ad := math.Abs(float64(d)); ad > maxAbsDiff {
				maxAbsDiff = ad
			}
			dot += float64(float64(a) * float64(b))
			na += float64(float64(a) * float64(a))
			sumExp += e[i]
		}
	}
	st.sumSqDiff, st.sumSqCand, st.maxAbsDiff, st.dot, st.na = sumSqDiff, sumSqCand, maxAbsDiff, dot, na
	return sumExp
}

// topK appends the indices of the k largest values, largest first, ties to
// the lower index (so element 0 is the first index of the maximum).
func topK(row []float32, k int, dst []int) []int {
	k = min(k, len(row))
	for i := 0; i < len(row); i++ {
		if len(dst) == k { // skip to the next value above the k-th
			kth := row[dst[k-1]]
			for i < len(row) && !(row[i] > kth) {
				i++
			}
			if i == len(row) {
				break
			}
		}
		if len(dst) < k {
			dst = append(dst, i)
		} else {
			dst[k-1] = i
		}
		// Insertion step: move the new index up past smaller values only,
		// so an equal earlier index stays ahead.
		for j := len(dst) - 1; j > 0 && row[dst[j]] > row[dst[j-1]]; j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

// Result summarizes the rows added so far. With no compared rows the
// statistics are 0 (NMSE is NaN then, as 0/0).
func (s *LogitStats) Result() LogitResult {
	r := LogitResult{
		Rows: s.rows, SkippedRows: s.skipped, ComparedRows: s.rows - s.skipped,
		CandNaN: s.candNaN, CandInf: s.candInf, RefNaN: s.refNaN, RefInf: s.refInf,
		NMSE:       s.sumSqDiff / s.sumSqCand,
		MaxAbsDiff: s.maxAbsDiff,
	}
	if n := r.ComparedRows; n > 0 {
		r.CosMin = s.cosMin
		r.CosMean = s.cosSum / float64(n)
		r.Top5Overlap = s.top5Sum / float64(n)
		r.Top1Agree = float64(s.top1Same) / float64(n)
	}
	return r
}

// nonFinite counts the NaNs and infinities in row; a row without any (the
// usual case) costs one test of the exponent bits per element.
func nonFinite(row []float32) (nan, inf int) {
	// bits&exp == exp (all exponent bits set) exactly when adding one to
	// the exponent field carries into the sign bit: no branch per element.
	const exp, one = 0x7f800000, 0x00800000
	var carry uint32
	for _, v := range row {
		carry |= math.Float32bits(v)&exp + one
	}
	if carry&0x80000000 == 0 {
		return 0, 0
	}
	for _, v := range row {
		switch a := float64(v); {
		case math.IsNaN(a):
			nan++
		case math.IsInf(a, 0):
			inf++
		}
	}
	return nan, inf
}
