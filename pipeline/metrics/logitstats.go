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
	topCand, topRef                  []int
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
	if len(cand) != len(ref) {
		return fmt.Errorf("metrics: candidate row has %d logits, reference row %d", len(cand), len(ref))
	}
	if len(cand) == 0 {
		return fmt.Errorf("metrics: empty logit row")
	}
	s.rows++
	finite := true
	for i := range cand {
		a, b := float64(cand[i]), float64(ref[i])
		switch {
		case math.IsNaN(a):
			s.candNaN++
			finite = false
		case math.IsInf(a, 0):
			s.candInf++
			finite = false
		}
		switch {
		case math.IsNaN(b):
			s.refNaN++
			finite = false
		case math.IsInf(b, 0):
			s.refInf++
			finite = false
		}
	}
	if !finite {
		s.skipped++
		return nil
	}

	var dot, na, nb float64
	for i := range cand {
		a, b := cand[i], ref[i]
		d := a - b
		s.sumSqDiff += float64(d * d)
		s.sumSqCand += float64(a * a)
		s.maxAbsDiff = max(s.maxAbsDiff, math.Abs(float64(d)))
		dot += float64(float64(a) * float64(b))
		na += float64(float64(a) * float64(a))
		nb += float64(float64(b) * float64(b))
	}
	var cos float64
	switch {
	case na == 0 && nb == 0:
		cos = 1
	case na == 0 || nb == 0:
		cos = 0
	default:
		cos = dot / (math.Sqrt(na) * math.Sqrt(nb))
	}
	if s.rows-s.skipped == 1 || cos < s.cosMin {
		s.cosMin = cos
	}
	s.cosSum += cos

	s.topCand = topK(cand, 5, s.topCand[:0])
	s.topRef = topK(ref, 5, s.topRef[:0])
	overlap := 0
	for _, i := range s.topCand {
		for _, j := range s.topRef {
			if i == j {
				overlap++
			}
		}
	}
	s.top5Sum += float64(overlap) / float64(len(s.topCand))
	if s.topCand[0] == s.topRef[0] {
		s.top1Same++
	}
	return nil
}

// topK appends the indices of the k largest values, largest first, ties to
// the lower index (so element 0 is the first index of the maximum).
func topK(row []float32, k int, dst []int) []int {
	k = min(k, len(row))
	for i, v := range row {
		if len(dst) == k && !(v > row[dst[k-1]]) {
			continue
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
