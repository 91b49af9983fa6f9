package ggml

import (
	"math"
	"strings"
	"testing"
)

func TestE8M0ToF32Half(t *testing.T) {
	for e, want := range map[uint8]float64{
		0:   0x1p-128, // subnormal
		1:   0x1p-127, // subnormal
		2:   0x1p-126, // smallest normal
		127: 0.5,
		128: 1,
		130: 4,
		254: 0x1p126,
		255: 0x1p127, // not NaN in ggml
	} {
		if got := E8M0ToF32Half(e); float64(got) != want {
			t.Errorf("E8M0ToF32Half(%d) = %g, want %g", e, got, want)
		}
	}
}

// mxfp4Block builds one block from a scale byte and 32 codes.
func mxfp4Block(e uint8, codes [32]byte) []byte {
	b := make([]byte, 17)
	b[0] = e
	for j := range 16 {
		b[1+j] = codes[j] | codes[j+16]<<4
	}
	return b
}

// TestDequantizeMXFP4 checks hand-built blocks against the E2M1 table:
// codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and 8..15 their negatives (8 is
// 0), times the E8M0 scale 2^(e-127).
func TestDequantizeMXFP4(t *testing.T) {
	e2m1 := [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}
	for _, e := range []uint8{127, 128, 131, 100, 0, 254} {
		var codes [32]byte
		for j := range codes {
			codes[j] = byte((j*7 + 3) % 16) // every code, low and high nibbles
		}
		y := dequant(t, MXFP4, mxfp4Block(e, codes))
		scale := math.Ldexp(1, int(e)-127)
		for j, c := range codes {
			want := float32(float64(e2m1[c]) * scale)
			if y[j] != want {
				t.Errorf("e=%d element %d code %d: %g, want %g", e, j, c, y[j], want)
			}
		}
	}
	// The extremes: the max code (±6) at the largest scale that stays finite,
	// past it +-Inf as in ggml (float overflow), the smallest nonzero
	// magnitude at e = 0 (a float32 subnormal), and code 8 (-0 in E2M1).
	var codes [32]byte
	codes[0], codes[16], codes[5], codes[31] = 7, 15, 8, 1
	y := dequant(t, MXFP4, mxfp4Block(252, codes))
	expectValues(t, MXFP4, y, map[int]float32{0: 6 * 0x1p125, 16: -6 * 0x1p125, 1: 0, 31: 0x1p124})
	if y[5] != 0 || math.Signbit(float64(y[5])) {
		t.Errorf("code 8: %g, want +0 (ggml's table holds 0, not -0)", y[5])
	}
	y = dequant(t, MXFP4, mxfp4Block(254, codes))
	if !math.IsInf(float64(y[0]), 1) || !math.IsInf(float64(y[16]), -1) || y[31] != 0x1p126 {
		t.Errorf("e=254: %g, %g, %g; want +Inf, -Inf, 2^126", y[0], y[16], y[31])
	}
	y = dequant(t, MXFP4, mxfp4Block(0, codes))
	expectValues(t, MXFP4, y, map[int]float32{0: 6 * 0x1p-127, 31: 0x1p-128})
}

func TestVecDotMXFP4Hand(t *testing.T) {
	var codes [32]byte
	codes[0] = 7                // 6
	codes[1] = 13               // -3
	codes[16] = 2               // 1
	codes[31] = 12              // -2
	w := mxfp4Block(128, codes) // scale 2
	x := make([]byte, 34)
	put16(x, 0, h0_5)
	x[2], x[3], x[18], x[33] = 1, 2, 0xFD, 4 // 6*1 + -3*2 + 1*-3 + -2*4 = -11
	if got, want := VecDot(MXFP4, w, x, 32), float32(-11*2*0.5); got != want {
		t.Errorf("VecDot(MXFP4) = %g, want %g", got, want)
	}
	if got := DotRow(MXFP4, w, []float32{1, 2, 30: 5, 31: 4, 16: -3}); got != (12-12-6-16)*1 {
		t.Errorf("DotRow(MXFP4) = %g, want %g", got, float32(12-12-6-16))
	}
}

func TestQuantizeMXFP4(t *testing.T) {
	// amax 6 -> e = floor(log2 6) - 2 + 127 = 127, d = 2^-1: every value on
	// the grid kvalues·d = E2M1 comes back exactly.
	x := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6, 0,
		6, 4, 3, 2, 1.5, 1, 0.5, 0, -6, -4, -3, -2, -1.5, -1, -0.5, 0.25}
	b := make([]byte, 17)
	if err := Quantize(MXFP4, x, b); err != nil {
		t.Fatal(err)
	}
	if b[0] != 127 {
		t.Errorf("e = %d, want 127 (amax 6: floor(log2 6) - 2 + 127)", b[0])
	}
	y := dequant(t, MXFP4, b)
	for i := range x {
		want := x[i]
		if i == 31 {
			want = 0 // 0.25 ties between 0 and 0.5: the first code (0) wins
		}
		if y[i] != want {
			t.Errorf("x[%d] = %g came back as %g, want %g", i, x[i], y[i], want)
		}
	}
	zero := make([]byte, 17)
	if err := Quantize(MXFP4, make([]float32, 32), zero); err != nil || zero[0] != 0 {
		t.Errorf("all-zero block: e = %d, err %v", zero[0], err)
	}
}

func TestMXFP4BadSize(t *testing.T) {
	if err := Dequantize(MXFP4, make([]byte, 16), make([]float32, 32)); err == nil || !strings.Contains(err.Error(), "MXFP4: 16 bytes for 32 elements, want 17") {
		t.Errorf("short MXFP4 block: err = %v", err)
	}
	if _, err := RowBytes(MXFP4, 48); err == nil || !strings.Contains(err.Error(), "block size 32") {
		t.Errorf("MXFP4 row of 48: err = %v", err)
	}
}
