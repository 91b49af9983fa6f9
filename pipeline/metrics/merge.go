package metrics

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Accumulators merge: a run accumulates each unit of work (a score chunk, a
// generate prompt) in its own KLD and LogitStats and merges them into the
// run's in a fixed unit order. Merging sums float64 totals one unit at a
// time, so a run split into shards and merged in the same unit order gets
// the same bits as one process (every sum is Σ over units of the unit's
// own sum, computed the same way on either side).

// Merge adds every position of o after k's, as if o's rows had been added
// to k, with o's sums added as totals.
func (k *KLD) Merge(o *KLD) {
	k.sumNLL += o.sumNLL
	k.sumNLL2 += o.sumNLL2
	k.sumNLLBase += o.sumNLLBase
	k.sumNLLBase2 += o.sumNLLBase2
	k.sumNLLNLLBase += o.sumNLLNLLBase
	k.sumKLD += o.sumKLD
	k.sumKLD2 += o.sumKLD2
	k.sumPDiff += o.sumPDiff
	k.sumPDiff2 += o.sumPDiff2
	k.sumPDiff4 += o.sumPDiff4
	k.maxPDiff = max(k.maxPDiff, o.maxPDiff)
	k.sameTop += o.sameTop
	k.kld = append(k.kld, o.kld...)
	k.pDiff = append(k.pDiff, o.pDiff...)
}

// Merge adds o's rows after s's.
func (s *LogitStats) Merge(o *LogitStats) {
	if n := o.rows - o.skipped; n > 0 && (s.rows-s.skipped == 0 || o.cosMin < s.cosMin) {
		s.cosMin = o.cosMin
	}
	s.rows += o.rows
	s.skipped += o.skipped
	s.candNaN += o.candNaN
	s.candInf += o.candInf
	s.refNaN += o.refNaN
	s.refInf += o.refInf
	s.sumSqDiff += o.sumSqDiff
	s.sumSqCand += o.sumSqCand
	s.cosSum += o.cosSum
	s.maxAbsDiff = max(s.maxAbsDiff, o.maxAbsDiff)
	s.top5Sum += o.top5Sum
	s.top1Same += o.top1Same
}

// Merge adds o's rows after p's: both are brought to the wider bucket
// width (neighbours merged as Add merges them) and added bucket by bucket.
func (p *Positions) Merge(o *Positions) {
	if len(o.buckets) == 0 {
		return
	}
	if p.width == 0 {
		p.width = 1
	}
	ob, ow := o.buckets, o.width
	for ow < p.width {
		ob, ow = widenBuckets(ob), ow*2
	}
	for p.width < ow {
		p.widen()
	}
	if len(ob) > len(p.buckets) {
		p.buckets = append(p.buckets, make([]positionBucket, len(ob)-len(p.buckets))...)
	}
	for i, b := range ob {
		p.buckets[i].add(b)
	}
}

// The binary forms below are little-endian, bit exact (NaN payloads
// included), and versioned by their leading tag.
const (
	kldTag   = "kld1"
	logitTag = "lgt1"
	posTag   = "pos1"
)

// MarshalBinary encodes the accumulator: its sums and every per-token KLD
// and Δp (8 bytes a token).
func (k *KLD) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 4+8*12+8*len(k.kld))
	b = append(b, kldTag...)
	b = appendF64s(b, k.sumNLL, k.sumNLL2, k.sumNLLBase, k.sumNLLBase2, k.sumNLLNLLBase,
		k.sumKLD, k.sumKLD2, k.sumPDiff, k.sumPDiff2, k.sumPDiff4)
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(k.maxPDiff))
	b = binary.LittleEndian.AppendUint64(b, uint64(k.sameTop))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(k.kld)))
	for i := range k.kld {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(k.kld[i]))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(k.pDiff[i]))
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, replacing k.
func (k *KLD) UnmarshalBinary(data []byte) error {
	d, out := newDecoder(data, kldTag, "a KLD accumulator"), KLD{}
	d.f64s(&out.sumNLL, &out.sumNLL2, &out.sumNLLBase, &out.sumNLLBase2, &out.sumNLLNLLBase,
		&out.sumKLD, &out.sumKLD2, &out.sumPDiff, &out.sumPDiff2, &out.sumPDiff4)
	out.maxPDiff = math.Float32frombits(d.u32())
	out.sameTop = int(d.u64())
	n := d.u64()
	if d.err == nil && n > uint64(len(d.b))/8 {
		return errors.New("metrics: KLD accumulator truncated")
	}
	out.kld, out.pDiff = make([]float32, n), make([]float32, n)
	for i := range n {
		out.kld[i] = math.Float32frombits(d.u32())
		out.pDiff[i] = math.Float32frombits(d.u32())
	}
	if err := d.end(); err != nil {
		return err
	}
	if out.sameTop < 0 || out.sameTop > len(out.kld) {
		return fmt.Errorf("metrics: KLD accumulator: %d same-top positions of %d", out.sameTop, n)
	}
	*k = out
	return nil
}

// MarshalBinary encodes the accumulator (fixed size).
func (s *LogitStats) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 4+8*13)
	b = append(b, logitTag...)
	for _, v := range []int{s.rows, s.skipped, s.candNaN, s.candInf, s.refNaN, s.refInf, s.top1Same} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = appendF64s(b, s.sumSqDiff, s.sumSqCand, s.cosSum, s.cosMin, s.maxAbsDiff, s.top5Sum)
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, replacing s.
func (s *LogitStats) UnmarshalBinary(data []byte) error {
	d, out := newDecoder(data, logitTag, "a logit statistics accumulator"), LogitStats{}
	for _, p := range []*int{&out.rows, &out.skipped, &out.candNaN, &out.candInf, &out.refNaN, &out.refInf, &out.top1Same} {
		v := d.u64()
		if v > 1<<53 {
			return errors.New("metrics: logit statistics accumulator: count out of range")
		}
		*p = int(v)
	}
	d.f64s(&out.sumSqDiff, &out.sumSqCand, &out.cosSum, &out.cosMin, &out.maxAbsDiff, &out.top5Sum)
	if err := d.end(); err != nil {
		return err
	}
	if out.skipped > out.rows || out.top1Same > out.rows {
		return errors.New("metrics: logit statistics accumulator: inconsistent counts")
	}
	*s = out
	return nil
}

// MarshalBinary encodes the profile (32 bytes a bucket).
func (p *Positions) MarshalBinary() ([]byte, error) {
	b := append(make([]byte, 0, 4+16+32*len(p.buckets)), posTag...)
	b = binary.LittleEndian.AppendUint64(b, uint64(p.width))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(p.buckets)))
	for _, k := range p.buckets {
		for _, v := range []uint64{uint64(k.n), uint64(k.same), uint64(k.finite), math.Float64bits(k.sumKLD)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote, replacing p.
func (p *Positions) UnmarshalBinary(data []byte) error {
	d := newDecoder(data, posTag, "a position profile")
	width, n := d.u64(), d.u64()
	if d.err != nil {
		return d.err
	}
	if n > maxPositionBuckets || width > 1<<40 || (n > 0) != (width > 0) {
		return errors.New("metrics: position profile out of range")
	}
	out := Positions{width: int(width), buckets: make([]positionBucket, n)}
	for i := range out.buckets {
		k := &out.buckets[i]
		k.n, k.same, k.finite, k.sumKLD = int64(d.u64()), int64(d.u64()), int64(d.u64()), d.f64()
		if k.n < 0 || k.same < 0 || k.same > k.n || k.finite < 0 || k.finite > k.n {
			return errors.New("metrics: position profile: inconsistent counts")
		}
	}
	if err := d.end(); err != nil {
		return err
	}
	*p = out
	return nil
}

// decoder reads little-endian values, remembering the first short read.
type decoder struct {
	b   []byte
	err error
}

// newDecoder starts reading data after its leading tag; without the tag
// it reads nothing, and end reports that data is not what was expected.
func newDecoder(data []byte, tag, what string) *decoder {
	if len(data) < len(tag) || string(data[:len(tag)]) != tag {
		return &decoder{err: errors.New("metrics: not " + what)}
	}
	return &decoder{b: data[len(tag):]}
}

func (d *decoder) take(n int) []byte {
	if len(d.b) < n {
		d.err = cmp.Or(d.err, errors.New("metrics: accumulator truncated"))
		d.b = nil
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32  { return binary.LittleEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64  { return binary.LittleEndian.Uint64(d.take(8)) }
func (d *decoder) f64() float64 { return math.Float64frombits(d.u64()) }

// f64s reads a float64 into each of ps in turn.
func (d *decoder) f64s(ps ...*float64) {
	for _, p := range ps {
		*p = d.f64()
	}
}

// appendF64s appends each of vs, bit exact.
func appendF64s(b []byte, vs ...float64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func (d *decoder) end() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("metrics: %d bytes after the accumulator", len(d.b))
	}
	return nil
}
