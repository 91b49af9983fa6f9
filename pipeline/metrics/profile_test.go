package metrics

import (
	"math"
	"reflect"
	"testing"
)

func TestHistogramKLD(t *testing.T) {
	h := HistogramKLD([]float32{0, -1e-9, 1e-20, 1e-14, 1.5e-14, 1.01e-6, 9.9e-7, 1e3, float32(math.Inf(1)), float32(math.NaN())})
	want := make([]int64, HistBins)
	want[0] = 3  // 1e-20 (below the range), 1e-14, 1.5e-14 (log10 -13.82: bin 0)
	want[32] = 1 // 1.01e-6: log10 −5.996 → (−5.996+14)/0.25 = 32.02
	want[31] = 1 // 9.9e-7 just below
	want[HistBins-1] = 2
	if h.Zero != 2 || !reflect.DeepEqual(h.Counts, want) || h.Lo != HistLo || h.Width != HistWidth {
		t.Fatalf("histogram zero %d counts %v", h.Zero, h.Counts)
	}
}

func ptr(v float64) *float64 { return &v }

func row(kld float64, same bool) KLDRow { return KLDRow{kld: kld, sameTop: same} }

func TestPositionsBucketsAndWidens(t *testing.T) {
	var p Positions
	if p.Result() != nil {
		t.Fatal("empty profile not nil")
	}
	for pos := range 100 {
		p.Add(pos, row(float64(pos), pos%2 == 0))
	}
	r := p.Result()
	if r.Width != 1 || len(r.Buckets) != 100 || !reflect.DeepEqual(r.Buckets[7], PositionBucket{Pos: 7, N: 1, KLDMean: ptr(7), SameTopP: 0}) {
		t.Fatalf("width %d, %d buckets, [7] %+v", r.Width, len(r.Buckets), r.Buckets[7])
	}
	// Position 300 needs width 4 (300/4 = 75 < 128): buckets of 4 merge.
	p.Add(300, row(1, true))
	r = p.Result()
	if r.Width != 4 || len(r.Buckets) != 26 || !reflect.DeepEqual(r.Buckets[1], PositionBucket{Pos: 4, N: 4, KLDMean: ptr(5.5), SameTopP: 0.5}) ||
		!reflect.DeepEqual(r.Buckets[25], PositionBucket{Pos: 300, N: 1, KLDMean: ptr(1), SameTopP: 1}) {
		t.Fatalf("after widening: width %d, %d buckets, [1] %+v, last %+v", r.Width, len(r.Buckets), r.Buckets[1], r.Buckets[len(r.Buckets)-1])
	}
	// The same rows added with the wide position first give the same profile.
	var q Positions
	q.Add(300, row(1, true))
	for pos := range 100 {
		q.Add(pos, row(float64(pos), pos%2 == 0))
	}
	if !reflect.DeepEqual(q.Result(), r) {
		t.Fatalf("order of widening changed the profile:\n%+v\n%+v", q.Result(), r)
	}
	// Bounded: a position near the model limit keeps at most 128 buckets.
	q.Add(1<<24-1, row(0, true))
	if r := q.Result(); r.Width != 1<<17 || len(q.buckets) > maxPositionBuckets {
		t.Fatalf("width %d, %d buckets", r.Width, len(q.buckets))
	}
}

func TestPositionsNaNKLD(t *testing.T) {
	var p Positions
	p.Add(0, row(math.NaN(), false))
	p.Add(1, row(math.NaN(), false))
	p.Add(1, row(0.5, true))
	b := p.Result().Buckets
	if b[0].KLDMean != nil || b[0].N != 1 || *b[1].KLDMean != 0.5 || b[1].N != 2 || b[1].SameTopP != 0.5 {
		t.Fatalf("%+v", b)
	}
}
