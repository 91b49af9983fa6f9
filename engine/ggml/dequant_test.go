package ggml

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// Half-precision bit patterns used by the hand-built blocks.
const (
	h0_25 = 0x3400 // 0.25
	h0_5  = 0x3800 // 0.5
	h1    = 0x3C00 // 1
	h2    = 0x4000 // 2
	hm1   = 0xBC00 // -1
	h1_8  = 0x3000 // 0.125
)

func put16(b []byte, off int, v uint16) { binary.LittleEndian.PutUint16(b[off:], v) }

func dequant(t *testing.T, typ Type, b []byte) []float32 {
	t.Helper()
	y := make([]float32, len(b)/typ.TypeSize()*typ.BlockSize())
	if err := Dequantize(typ, b, y); err != nil {
		t.Fatal(err)
	}
	return y
}

func expectValues(t *testing.T, typ Type, y []float32, want map[int]float32) {
	t.Helper()
	for i, w := range want {
		if y[i] != w {
			t.Errorf("%s: y[%d] = %g, want %g", typ, i, y[i], w)
		}
	}
}

func TestDequantizePlain(t *testing.T) {
	b := make([]byte, 12)
	binary.LittleEndian.PutUint32(b[0:], math.Float32bits(1.5))
	binary.LittleEndian.PutUint32(b[4:], math.Float32bits(-0.25))
	binary.LittleEndian.PutUint32(b[8:], math.Float32bits(3e-39))
	expectValues(t, F32, dequant(t, F32, b), map[int]float32{0: 1.5, 1: -0.25, 2: 3e-39})

	h := []byte{0x00, 0x3C, 0x01, 0x00, 0x00, 0xFC} // 1, 2^-24, -Inf
	y := dequant(t, F16, h)
	expectValues(t, F16, y, map[int]float32{0: 1, 1: 0x1p-24, 2: float32(math.Inf(-1))})

	bf := []byte{0x80, 0x3F, 0xA0, 0xC0} // 1, -5
	expectValues(t, BF16, dequant(t, BF16, bf), map[int]float32{0: 1, 1: -5})
}

func TestDequantizeQ4_0(t *testing.T) {
	b := make([]byte, 18)
	put16(b, 0, h0_5)
	b[2] = 0x0F // y[0] = (15-8)*0.5, y[16] = (0-8)*0.5
	b[3] = 0x81 // y[1] = (1-8)*0.5, y[17] = (8-8)*0.5
	b[17] = 0xC8
	expectValues(t, Q4_0, dequant(t, Q4_0, b), map[int]float32{
		0: 3.5, 16: -4, 1: -3.5, 17: 0, 15: 0, 31: 2, 5: -4,
	})
}

func TestDequantizeQ4_1(t *testing.T) {
	b := make([]byte, 20)
	put16(b, 0, h0_25)
	put16(b, 2, hm1)
	b[4] = 0x3A // y[0] = 10*0.25-1, y[16] = 3*0.25-1
	b[19] = 0xF0
	expectValues(t, Q4_1, dequant(t, Q4_1, b), map[int]float32{
		0: 1.5, 16: -0.25, 15: -1, 31: 2.75, 3: -1,
	})
}

func TestDequantizeQ5_0(t *testing.T) {
	b := make([]byte, 22)
	put16(b, 0, h1)
	binary.LittleEndian.PutUint32(b[2:], 0x00020001) // fifth bit of elements 0 and 17
	b[6] = 0x21                                      // y[0] = (1|16)-16, y[16] = 2-16
	b[7] = 0x0F                                      // y[1] = 15-16, y[17] = (0|16)-16
	expectValues(t, Q5_0, dequant(t, Q5_0, b), map[int]float32{
		0: 1, 16: -14, 1: -1, 17: 0, 2: -16, 31: -16,
	})
}

func TestDequantizeQ5_1(t *testing.T) {
	b := make([]byte, 24)
	put16(b, 0, h0_5)
	put16(b, 2, h2)
	binary.LittleEndian.PutUint32(b[4:], 0x80000000) // fifth bit of element 31
	b[8+15] = 0xF0                                   // y[15] = 0*0.5+2, y[31] = 31*0.5+2
	b[8] = 0x07                                      // y[0] = 7*0.5+2
	expectValues(t, Q5_1, dequant(t, Q5_1, b), map[int]float32{
		15: 2, 31: 17.5, 0: 5.5, 16: 2,
	})
}

func TestDequantizeQ8_0(t *testing.T) {
	b := make([]byte, 34)
	put16(b, 0, h1_8)
	b[2] = 0x80  // -128
	b[33] = 0x7F // 127
	b[3] = 0xFF  // -1
	expectValues(t, Q8_0, dequant(t, Q8_0, b), map[int]float32{
		0: -16, 31: 15.875, 1: -0.125, 2: 0,
	})
}

// k4Scales packs scales/mins so that sub-blocks 0, 1, 4, 5 and 7 exercise both
// the j < 4 and the j >= 4 unpacking of get_scale_min_k4:
// (sc,m) = 0:(5,3) 1:(2,1) 4:(58,39) 5:(3,1) 7:(17,50).
func k4Scales() []byte {
	s := make([]byte, 12)
	s[0] = 0xC5  // sc0 = 5, top bits 3 -> sc4 bits 4-5
	s[1] = 0x02  // sc1 = 2
	s[3] = 0x40  // sc3 = 0, top bits 1 -> sc7 bits 4-5
	s[4] = 0x83  // m0 = 3, top bits 2 -> m4 bits 4-5
	s[5] = 0x01  // m1 = 1
	s[7] = 0xC0  // m3 = 0, top bits 3 -> m7 bits 4-5
	s[8] = 0x7A  // sc4 low = 0xA, m4 low = 7
	s[9] = 0x13  // sc5 = 3, m5 = 1
	s[11] = 0x21 // sc7 low = 1, m7 low = 2
	return s
}

func TestScaleMinK4(t *testing.T) {
	s := k4Scales()
	want := map[int][2]uint8{0: {5, 3}, 1: {2, 1}, 2: {0, 0}, 3: {0, 0}, 4: {58, 39}, 5: {3, 1}, 6: {0, 0}, 7: {17, 50}}
	for j, w := range want {
		if sc, m := scaleMinK4(j, s); sc != w[0] || m != w[1] {
			t.Errorf("scaleMinK4(%d) = (%d,%d), want (%d,%d)", j, sc, m, w[0], w[1])
		}
	}
}

func TestDequantizeQ4_K(t *testing.T) {
	b := make([]byte, 144)
	put16(b, 0, h1)   // d
	put16(b, 2, h0_5) // dmin
	copy(b[4:16], k4Scales())
	q := b[16:]
	q[0] = 0x79   // y[0] = 5*9 - 0.5*3, y[32] = 2*7 - 0.5*1
	q[64] = 0x04  // y[128] = 58*4 - 0.5*39 (sub-block 4), y[160] = 3*0 - 0.5*1
	q[127] = 0xF0 // y[255] = 17*15 - 0.5*50 (sub-block 7)
	expectValues(t, Q4_K, dequant(t, Q4_K, b), map[int]float32{
		0: 43.5, 1: -1.5, 32: 13.5, 33: -0.5, 128: 212.5, 160: -0.5, 255: 230, 224: -25, 64: 0,
	})
}

func TestDequantizeQ5_K(t *testing.T) {
	b := make([]byte, 176)
	put16(b, 0, h1)
	put16(b, 2, h0_5)
	copy(b[4:16], k4Scales())
	qh, q := b[16:48], b[48:]
	qh[0] = 0x01 | 0x20 // +16 for element 0 (bit 0) and element 160 (bit 5: chunk 2, high half)
	qh[31] = 0x80       // +16 for element 192+32+31 = 255 (bit 7)
	q[0] = 0x79
	q[64] = 0x04
	q[127] = 0xF0
	expectValues(t, Q5_K, dequant(t, Q5_K, b), map[int]float32{
		0: 5*25 - 1.5, 32: 13.5, 128: 212.5, 160: 3*16 - 0.5, 255: 17*31 - 25, 1: -1.5,
	})
}

func TestDequantizeQ6_K(t *testing.T) {
	b := make([]byte, 210)
	ql, qh, sc := b[0:128], b[128:192], b[192:208]
	put16(b, 208, h0_5)
	sc[0], sc[2], sc[4], sc[6] = 0xFD, 4, 10, 0xFF // -3, 4, 10, -1
	sc[13] = 7
	ql[0] = 0x21
	ql[32] = 0x05
	qh[0] = 0xE4 // 2-bit highs: q1 0, q2 1, q3 2, q4 3
	ql[64+17] = 0xF0
	qh[32+17] = 0x30
	expectValues(t, Q6_K, dequant(t, Q6_K, b), map[int]float32{
		0:   0.5 * -3 * (1 - 32),      // 46.5
		32:  0.5 * 4 * (5 + 16 - 32),  // -22
		64:  0.5 * 10 * (2 + 32 - 32), // 10
		96:  0.5 * -1 * (0 + 48 - 32), // -8
		209: 0.5 * 7 * (15 + 48 - 32), // 108.5, second half, is = 1
		1:   0.5 * -3 * -32,           // 48
		128: 0,                        // sc[8] = 0
	})
}

func TestDequantizeQ8_K(t *testing.T) {
	b := make([]byte, 292)
	binary.LittleEndian.PutUint32(b, math.Float32bits(0.25))
	b[4+5] = 0xF9 // -7
	b[4+255] = 100
	binary.LittleEndian.PutUint16(b[260:], 0xFFFF) // bsums are ignored
	expectValues(t, Q8_K, dequant(t, Q8_K, b), map[int]float32{5: -1.75, 255: 25, 0: 0})
}

func TestDequantizeErrors(t *testing.T) {
	dst := make([]float32, 256)
	err := Dequantize(IQ2_XS, make([]byte, 74), dst)
	if err == nil || err.Error() != "unsupported tensor type IQ2_XS" {
		t.Errorf("IQ2_XS: err = %v", err)
	}
	if err := Dequantize(Q8_0, make([]byte, 33), dst[:32]); err == nil || !strings.Contains(err.Error(), "Q8_0: 33 bytes for 32 elements, want 34") {
		t.Errorf("short Q8_0: err = %v", err)
	}
	if err := Dequantize(Q4_K, make([]byte, 144), dst[:128]); err == nil || !strings.Contains(err.Error(), "block size 256") {
		t.Errorf("Q4_K of 128: err = %v", err)
	}
	if err := Dequantize(Type(99), nil, nil); err == nil || !strings.Contains(err.Error(), "type(99)") {
		t.Errorf("type 99: err = %v", err)
	}
}
