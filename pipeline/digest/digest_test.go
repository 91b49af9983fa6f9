package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
)

// leBytes is the reference layout: float32 little-endian, row after row.
func leBytes(rows ...[]float32) []byte {
	var b bytes.Buffer
	for _, r := range rows {
		binary.Write(&b, binary.LittleEndian, r)
	}
	return b.Bytes()
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestPromptDigestIsSHA256OfRawRows(t *testing.T) {
	rows := [][]float32{{1, -2.5, float32(math.Inf(1)), 3e-38}, {0, float32(math.Copysign(0, -1)), float32(math.NaN()), 7}}
	toks := []int32{1, -7, 300000}
	for _, le := range []bool{true, false} { // in place, and through the conversion buffer
		old := littleEndian
		littleEndian = le
		h := NewHasher(64)
		h.Tokens(toks[:1])
		h.Tokens(toks[1:])
		for _, r := range rows {
			h.Row(r)
		}
		p := h.Sum()
		littleEndian = old
		if p.LogitsSHA256 != sha(leBytes(rows...)) {
			t.Fatalf("littleEndian=%v: logits digest %s, want sha256 of the little-endian rows", le, p.LogitsSHA256)
		}
		var tb bytes.Buffer
		binary.Write(&tb, binary.LittleEndian, toks)
		if p.TokensSHA256 != sha(tb.Bytes()) {
			t.Fatalf("littleEndian=%v: tokens digest %s", le, p.TokensSHA256)
		}
		if p.LogitsFrom != 64 || p.Rows() != 2 || len(p.RowXXH64[0]) != 16 {
			t.Fatalf("littleEndian=%v: %+v", le, p)
		}
	}
}

func digestOf(rows ...[]float32) Prompt {
	h := NewHasher(0)
	for _, r := range rows {
		h.Row(r)
	}
	return h.Sum()
}

func TestFirstDiffFindsTheRow(t *testing.T) {
	a := digestOf([]float32{1, 2}, []float32{3, 4}, []float32{5, 6})
	// -0 and +0 compare equal as floats but are different bits: a change.
	b := digestOf([]float32{1, 2}, []float32{3, 4}, []float32{float32(math.Copysign(0, -1)), 6})
	c := digestOf([]float32{1, 2}, []float32{3, 4})
	switch {
	case a.FirstDiff(a) != -1:
		t.Fatal("identical digests differ")
	case a.FirstDiff(b) != 2 || b.FirstDiff(a) != 2:
		t.Fatalf("first diff %d, want row 2", a.FirstDiff(b))
	case a.FirstDiff(c) != 2 || c.FirstDiff(a) != 2:
		t.Fatalf("a missing row: %d, want 2", a.FirstDiff(c))
	case a.LogitsSHA256 == b.LogitsSHA256:
		t.Fatal("one bit changed, same sha256")
	}
	// The last bit of a mantissa.
	d := digestOf([]float32{1, 2}, []float32{3, math.Nextafter32(4, 5)}, []float32{5, 6})
	if a.FirstDiff(d) != 1 || a.LogitsSHA256 == d.LogitsSHA256 {
		t.Fatalf("one ulp: first diff %d", a.FirstDiff(d))
	}
}

func TestRunDigestDependsOnEveryPromptAndItsName(t *testing.T) {
	p1, p2 := digestOf([]float32{1}), digestOf([]float32{2})
	sum := func(adds ...func(*RunHasher)) *Run {
		var r RunHasher
		for _, a := range adds {
			a(&r)
		}
		return r.Sum()
	}
	add := func(ds, id string, p Prompt) func(*RunHasher) { return func(r *RunHasher) { r.Add(ds, id, p) } }
	base := sum(add("s", "chunk-1", p1), add("s", "chunk-2", p2))
	if base.Prompts != 2 || base.Rows != 2 {
		t.Fatalf("%+v", base)
	}
	if again := sum(add("s", "chunk-1", p1), add("s", "chunk-2", p2)); *again != *base {
		t.Fatal("not deterministic")
	}
	for name, other := range map[string]*Run{
		"order":   sum(add("s", "chunk-2", p2), add("s", "chunk-1", p1)),
		"id":      sum(add("s", "chunk-1", p1), add("s", "chunk-3", p2)),
		"logits":  sum(add("s", "chunk-1", p1), add("s", "chunk-2", p1)),
		"missing": sum(add("s", "chunk-1", p1)),
	} {
		if other.LogitsSHA256 == base.LogitsSHA256 {
			t.Errorf("%s: same run digest", name)
		}
	}
	if sum() != nil {
		t.Fatal("an empty run has a digest")
	}
}
