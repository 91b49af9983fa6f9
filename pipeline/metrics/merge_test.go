package metrics

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// units makes n units of rows (a candidate near a reference), each
// accumulated on its own, as a run accumulates a score chunk or a prompt.
func units(t *testing.T, n int) ([]KLD, []LogitStats) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	klds, logits := make([]KLD, n), make([]LogitStats, n)
	var ref RefRow
	for u := range n {
		for range 7 + u%5 {
			a, b := make([]float32, 200), make([]float32, 200)
			for i := range a {
				b[i] = float32(rng.NormFloat64() * 3)
				a[i] = b[i] + float32(rng.NormFloat64()*0.05*float64(u+1))
			}
			ref.Set(b)
			if err := AddLogitRow(a, &ref, &logits[u]); err != nil {
				t.Fatal(err)
			}
			row, err := LiveKLDRow(a, &ref, int32(rng.IntN(200)))
			if err != nil {
				t.Fatal(err)
			}
			klds[u].AddRow(row)
		}
	}
	return klds, logits
}

// TestMergeThroughBytesIsExact: units encoded (as a shard writes them),
// decoded and merged in unit order give the same bits as the units merged
// in memory in one process — whichever shards the units were in.
func TestMergeThroughBytesIsExact(t *testing.T) {
	klds, logits := units(t, 12)
	var kOne KLD
	var lOne LogitStats
	for u := range klds {
		kOne.Merge(&klds[u])
		lOne.Merge(&logits[u])
	}
	var kMerged KLD
	var lMerged LogitStats
	for u := range klds {
		kb, _ := klds[u].MarshalBinary()
		lb, _ := logits[u].MarshalBinary()
		var k KLD
		var l LogitStats
		if err := k.UnmarshalBinary(kb); err != nil {
			t.Fatal(err)
		}
		if err := l.UnmarshalBinary(lb); err != nil {
			t.Fatal(err)
		}
		kMerged.Merge(&k)
		lMerged.Merge(&l)
	}
	if kOne.Result() != kMerged.Result() || lOne.Result() != lMerged.Result() {
		t.Fatalf("merged through bytes differs:\n%+v\n%+v\n%+v\n%+v", kOne.Result(), kMerged.Result(), lOne.Result(), lMerged.Result())
	}
	a, _ := kOne.MarshalBinary()
	b, _ := kMerged.MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Fatal("merged KLD encodes differently")
	}
}

// TestMergeEqualsRowByRow: merging per-unit accumulators keeps every count,
// extreme and percentile of adding the rows to one accumulator, and its
// sums agree to rounding.
func TestMergeEqualsRowByRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var seqK, mergedK KLD
	var seqL, mergedL LogitStats
	var ref RefRow
	for u := range 9 {
		var k KLD
		var l LogitStats
		for range 11 {
			a, b := make([]float32, 100), make([]float32, 100)
			for i := range a {
				b[i] = float32(rng.NormFloat64() * 3)
				a[i] = b[i] + float32(rng.NormFloat64()*0.1)
			}
			if u == 4 {
				a[3] = float32(math.NaN()) // a skipped row in the middle unit
			}
			ref.Set(b)
			if err := AddLogitRow(a, &ref, &seqL, &l); err != nil {
				t.Fatal(err)
			}
			if u == 4 {
				continue
			}
			row, err := LiveKLDRow(a, &ref, int32(rng.IntN(100)))
			if err != nil {
				t.Fatal(err)
			}
			seqK.AddRow(row)
			k.AddRow(row)
		}
		mergedK.Merge(&k)
		mergedL.Merge(&l)
	}
	rs, rm := seqK.Result(), mergedK.Result()
	if rs.N != rm.N || rs.KLDQuantiles != rm.KLDQuantiles || rs.PDiffQuantiles != rm.PDiffQuantiles || rs.SameTop != rm.SameTop || rs.MaxAbsPDiff != rm.MaxAbsPDiff {
		t.Fatalf("counts or percentiles differ:\n%+v\n%+v", rs, rm)
	}
	for _, p := range [][2]float64{{rs.KLD.Value, rm.KLD.Value}, {rs.KLD.Err, rm.KLD.Err}, {rs.PPLQ.Value, rm.PPLQ.Value}, {rs.RMSPDiff.Value, rm.RMSPDiff.Value}} {
		if !near(p[0], p[1], 1e-12*math.Abs(p[0])) {
			t.Fatalf("sums differ beyond rounding: %v vs %v", p[0], p[1])
		}
	}
	ls, lm := seqL.Result(), mergedL.Result()
	if ls.Rows != lm.Rows || ls.SkippedRows != lm.SkippedRows || ls.CandNaN != lm.CandNaN || ls.CosMin != lm.CosMin || ls.MaxAbsDiff != lm.MaxAbsDiff || ls.Top1Agree != lm.Top1Agree ||
		!near(ls.NMSE, lm.NMSE, 1e-12*ls.NMSE) || !near(ls.CosMean, lm.CosMean, 1e-14) {
		t.Fatalf("logit stats differ:\n%+v\n%+v", ls, lm)
	}
	if ls.SkippedRows != 11 {
		t.Fatalf("skipped %d rows, want 11", ls.SkippedRows)
	}
}

func TestUnmarshalRefusesDamage(t *testing.T) {
	klds, logits := units(t, 1)
	kb, _ := klds[0].MarshalBinary()
	lb, _ := logits[0].MarshalBinary()
	for _, n := range []int{0, 3, 20, len(kb) - 1} {
		var k KLD
		if err := k.UnmarshalBinary(kb[:n]); err == nil {
			t.Errorf("KLD truncated to %d bytes accepted", n)
		}
	}
	var k KLD
	if err := k.UnmarshalBinary(append(kb, 0)); err == nil {
		t.Error("KLD with a trailing byte accepted")
	}
	var l LogitStats
	if err := l.UnmarshalBinary(lb[:len(lb)-1]); err == nil {
		t.Error("truncated logit stats accepted")
	}
	if err := l.UnmarshalBinary(kb); err == nil {
		t.Error("a KLD accumulator read as logit stats")
	}
}

func FuzzUnmarshalAccumulators(f *testing.F) {
	klds, logits := units(&testing.T{}, 1)
	kb, _ := klds[0].MarshalBinary()
	lb, _ := logits[0].MarshalBinary()
	f.Add(kb)
	f.Add(lb)
	f.Fuzz(func(t *testing.T, data []byte) {
		var k KLD
		if k.UnmarshalBinary(data) == nil {
			k.Result()
			if again, _ := k.MarshalBinary(); !bytes.Equal(again, data) {
				t.Fatal("KLD does not re-encode to its bytes")
			}
		}
		var l LogitStats
		if l.UnmarshalBinary(data) == nil {
			l.Result()
		}
		var p Positions
		if p.UnmarshalBinary(data) == nil {
			p.Result()
			p.Merge(&p)
		}
	})
}

// TestPositionsMerge: units of short and long sequences (the long ones
// widen the buckets) merged, through bytes, in order keep every row in
// the bucket Add puts it in, and encode the same either way.
func TestPositionsMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var seq, merged, viaBytes Positions
	for u := range 10 {
		var unit Positions
		n := 20 + 70*u // up to 650 positions: widths 1 .. 8
		for pos := range n {
			r := KLDRow{kld: rng.Float64(), sameTop: rng.IntN(3) > 0}
			seq.Add(pos, r)
			unit.Add(pos, r)
		}
		merged.Merge(&unit)
		b, _ := unit.MarshalBinary()
		var back Positions
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		viaBytes.Merge(&back)
	}
	rs, rm := seq.Result(), merged.Result()
	if rs.Width != rm.Width || len(rs.Buckets) != len(rm.Buckets) {
		t.Fatalf("width %d/%d, %d/%d buckets", rs.Width, rm.Width, len(rs.Buckets), len(rm.Buckets))
	}
	for i := range rs.Buckets {
		s, m := rs.Buckets[i], rm.Buckets[i]
		if s.Pos != m.Pos || s.N != m.N || s.SameTopP != m.SameTopP || !near(*s.KLDMean, *m.KLDMean, 1e-12) {
			t.Fatalf("bucket %d: %+v vs %+v", i, s, m)
		}
	}
	a, _ := merged.MarshalBinary()
	b, _ := viaBytes.MarshalBinary()
	if !bytes.Equal(a, b) {
		t.Fatal("merged through bytes differs")
	}
	var p Positions
	if err := p.UnmarshalBinary(a[:len(a)-3]); err == nil {
		t.Fatal("truncated profile accepted")
	}
}
