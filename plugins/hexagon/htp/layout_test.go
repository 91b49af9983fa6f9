package htp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
)

func randomBlocks(rng *rand.Rand, t ggml.Type, k, rows int) []byte {
	rb, _ := ggml.RowBytes(t, k)
	b := make([]byte, rb*rows)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestRepackRoundTrip: Unpack(Repack(w)) == w for every type and row length
// (whole super-blocks, a short last one, a row shorter than one).
func TestRepackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q8_0, ggml.MXFP4, ggml.F16, ggml.F32} {
		for _, k := range []int{32, 64, 160, 256, 288, 512, 800} {
			w := randomBlocks(rng, typ, k, 3)
			packed := make([]byte, len(w))
			if err := Repack(typ, k, w, packed); err != nil {
				t.Fatal(err)
			}
			back := make([]byte, len(w))
			if err := Unpack(typ, k, packed, back); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, w) {
				t.Fatalf("%s k=%d: round trip differs", typ, k)
			}
			if typ != ggml.F16 && typ != ggml.F32 && bytes.Equal(packed, w) {
				t.Fatalf("%s k=%d: repacking changed nothing", typ, k)
			}
		}
	}
}

// TestRepackLayout pins the documented positions: quants first, scales
// after, and in a 4-bit super-block of L elements byte j holds elements j
// (low nibble) and j+L/2 (high nibble).
func TestRepackLayout(t *testing.T) {
	const k = 288 // one full super-block and one of 32 elements
	// Q4_0 weights whose element e has the nibble e%16 and block b the
	// scale 0x100+b.
	nb := k / 32
	w := make([]byte, 18*nb)
	nib := func(e int) byte { return byte(e*7+e/16) & 0xF }
	for b := range nb {
		binary.LittleEndian.PutUint16(w[18*b:], uint16(0x100+b))
		for i := range 16 {
			w[18*b+2+i] = nib(32*b+i) | nib(32*b+16+i)<<4
		}
	}
	p := make([]byte, len(w))
	if err := Repack(ggml.Q4_0, k, w, p); err != nil {
		t.Fatal(err)
	}
	for e := range 256 {
		j, shift := e, 0
		if e >= 128 {
			j, shift = e-128, 4
		}
		if got := p[j] >> shift & 0xF; got != nib(e) {
			t.Fatalf("element %d: byte %d nibble %d holds %d, want %d", e, j, shift/4, got, nib(e))
		}
	}
	for e := 256; e < k; e++ { // the short super-block: L = 32, pairs (j, j+16)
		j, shift := 128+(e-256), 0
		if e-256 >= 16 {
			j, shift = 128+(e-256-16), 4
		}
		if got := p[j] >> shift & 0xF; got != nib(e) {
			t.Fatalf("element %d: byte %d nibble %d holds %d, want %d", e, j, shift/4, got, nib(e))
		}
	}
	for b := range nb {
		if got := binary.LittleEndian.Uint16(p[k/2+2*b:]); got != uint16(0x100+b) {
			t.Errorf("scale %d at byte %d: %#x, want %#x", b, k/2+2*b, got, 0x100+b)
		}
	}

	// Q8_0: the quants of a row in element order, then the scales.
	q8 := make([]byte, 34*2)
	for b := range 2 {
		binary.LittleEndian.PutUint16(q8[34*b:], uint16(0x200+b))
		for i := range 32 {
			q8[34*b+2+i] = byte(32*b + i)
		}
	}
	p8 := make([]byte, len(q8))
	if err := Repack(ggml.Q8_0, 64, q8, p8); err != nil {
		t.Fatal(err)
	}
	for e := range 64 {
		if p8[e] != byte(e) {
			t.Fatalf("Q8_0 element %d at byte %d: %d", e, e, p8[e])
		}
	}
	if binary.LittleEndian.Uint16(p8[64:]) != 0x200 || binary.LittleEndian.Uint16(p8[66:]) != 0x201 {
		t.Errorf("Q8_0 scales: % x", p8[64:])
	}

	// MXFP4: nibbles as Q4_0 (here L = 64: byte j pairs elements j and
	// j+32), one E8M0 byte per block after them.
	mx := make([]byte, 34)
	mx[0], mx[17] = 131, 90
	mx[1] = 0x21  // element 0 code 1, element 16 code 2
	mx[18] = 0x03 // element 32 code 3, element 48 code 0
	pm := make([]byte, 34)
	if err := Repack(ggml.MXFP4, 64, mx, pm); err != nil {
		t.Fatal(err)
	}
	if pm[0] != 0x31 || pm[16] != 0x02 || pm[32] != 131 || pm[33] != 90 {
		t.Errorf("MXFP4 repacked: % x", pm)
	}
}

func TestRepackErrors(t *testing.T) {
	if err := Repack(ggml.Q4_K, 256, make([]byte, 144), make([]byte, 144)); err == nil || !strings.Contains(err.Error(), "Q4_K are not supported") {
		t.Errorf("Q4_K: %v", err)
	}
	if err := Repack(ggml.Q8_0, 64, make([]byte, 67), make([]byte, 67)); err == nil || !strings.Contains(err.Error(), "not whole rows") {
		t.Errorf("partial row: %v", err)
	}
	if err := Unpack(ggml.Q4_0, 48, make([]byte, 18), make([]byte, 18)); err == nil || !strings.Contains(err.Error(), "block size 32") {
		t.Errorf("k=48: %v", err)
	}
}
