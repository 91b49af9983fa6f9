package metrics

import (
	"math"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// Histogram bins of per-token KLD: log10 from HistLo in steps of
// HistWidth, HistBins of them. The first bin also counts everything below,
// the last everything above; KLD ≤ 0 (identical rows) is counted apart.
const (
	HistLo    = -14.0
	HistWidth = 0.25
	HistBins  = 64 // up to 10^2
)

// KLDHistogram is summary.KLDHistogram.
type KLDHistogram = summary.KLDHistogram

// HistogramKLD bins per-token KLD values (KLD.Values).
func HistogramKLD(kld []float32) *KLDHistogram {
	h := &KLDHistogram{Lo: HistLo, Width: HistWidth, Counts: make([]int64, HistBins)}
	for _, v := range kld {
		switch {
		case v <= 0:
			h.Zero++
		case math.IsInf(float64(v), 1):
			h.Counts[HistBins-1]++
		case v > 0: // not NaN (the NaN counts report those)
			b := int(math.Floor((math.Log10(float64(v)) - HistLo) / HistWidth))
			h.Counts[min(max(b, 0), HistBins-1)]++
		}
	}
	return h
}

// maxPositionBuckets bounds a position profile (and summary.json).
const maxPositionBuckets = 128

// Positions accumulates KLD and top-1 agreement by position in the context
// (the token's index in its score chunk or generate sequence). Positions are
// bucketed; when a position beyond the last bucket arrives the bucket width
// doubles and neighbours merge, so memory is bounded and the result does
// not depend on anything but the rows added, in order.
// The zero value is ready to use.
type Positions struct {
	width   int
	buckets []positionBucket
}

type positionBucket struct {
	n, same, finite int64 // rows, rows with the same top-1, rows with a finite KLD
	sumKLD          float64
}

// Add adds one scored row at position pos (≥ 0).
func (p *Positions) Add(pos int, r KLDRow) {
	if p.width == 0 {
		p.width = 1
	}
	for pos/p.width >= maxPositionBuckets {
		p.widen()
	}
	i := pos / p.width
	if i >= len(p.buckets) {
		p.buckets = append(p.buckets, make([]positionBucket, i+1-len(p.buckets))...)
	}
	b := &p.buckets[i]
	b.n++
	if !math.IsNaN(r.kld) && !math.IsInf(r.kld, 0) { // NaN logits are reported by their counts
		b.finite++
		b.sumKLD += r.kld
	}
	if r.sameTop {
		b.same++
	}
}

func (p *Positions) widen() {
	p.buckets = widenBuckets(p.buckets)
	p.width *= 2
}

// widenBuckets merges neighbouring buckets pairwise.
func widenBuckets(buckets []positionBucket) []positionBucket {
	merged := make([]positionBucket, (len(buckets)+1)/2)
	for i, b := range buckets {
		merged[i/2].add(b)
	}
	return merged
}

func (m *positionBucket) add(b positionBucket) {
	m.n += b.n
	m.same += b.same
	m.finite += b.finite
	m.sumKLD += b.sumKLD
}

// PositionProfile is summary.PositionProfile.
type PositionProfile = summary.PositionProfile

// PositionBucket is summary.PositionBucket.
type PositionBucket = summary.PositionBucket

// Result returns the profile, nil when no row was added.
func (p *Positions) Result() *PositionProfile {
	if len(p.buckets) == 0 {
		return nil
	}
	out := &PositionProfile{Width: p.width}
	for i, b := range p.buckets {
		if b.n > 0 {
			pb := PositionBucket{Pos: i * p.width, N: b.n, SameTopP: float64(b.same) / float64(b.n)}
			if b.finite > 0 {
				m := b.sumKLD / float64(b.finite)
				pb.KLDMean = &m
			}
			out.Buckets = append(out.Buckets, pb)
		}
	}
	return out
}
