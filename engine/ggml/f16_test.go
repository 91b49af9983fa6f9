package ggml

import (
	"fmt"
	"math"
	"testing"
)

func TestF32ToF16Rounding(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3C00},
		{"tie 1+2^-11 goes to even 1", 1 + 1.0/2048, 0x3C00},
		{"tie 1+3*2^-11 goes to even 1+2^-9", 1 + 3.0/2048, 0x3C02},
		{"just above tie rounds up", math.Nextafter32(1+1.0/2048, 2), 0x3C01},
		{"65504 max finite", 65504, 0x7BFF},
		{"65519 rounds down to max", 65519, 0x7BFF},
		{"65520 overflows to +Inf", 65520, 0x7C00},
		{"-65520 overflows to -Inf", -65520, 0xFC00},
		{"smallest subnormal 2^-24", 0x1p-24, 0x0001},
		{"2^-25 ties to even zero", 0x1p-25, 0x0000},
		{"3*2^-25 ties to even 2*2^-24", 3 * 0x1p-25, 0x0002},
		{"largest subnormal", 1023 * 0x1p-24, 0x03FF},
		{"smallest normal 2^-14", 0x1p-14, 0x0400},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000},
		{"+Inf", float32(math.Inf(1)), 0x7C00},
		{"-2", -2, 0xC000},
	}
	for _, c := range cases {
		if got := F32ToF16(c.in); got != c.want {
			t.Errorf("%s: F32ToF16(%g) = %#04x, want %#04x", c.name, c.in, got, c.want)
		}
	}
	if h := F32ToF16(float32(math.NaN())); h&0x7C00 != 0x7C00 || h&0x03FF == 0 {
		t.Errorf("F32ToF16(NaN) = %#04x, not a NaN", h)
	}
}

func TestF16ToF32(t *testing.T) {
	cases := []struct {
		in   uint16
		want float32
	}{
		{0x3C00, 1}, {0xC000, -2}, {0x7BFF, 65504}, {0x0001, 0x1p-24},
		{0x03FF, 1023 * 0x1p-24}, {0x0400, 0x1p-14}, {0x3555, 0.333251953125},
		{0x7C00, float32(math.Inf(1))}, {0xFC00, float32(math.Inf(-1))},
	}
	for _, c := range cases {
		if got := F16ToF32(c.in); got != c.want {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", c.in, got, c.want)
		}
	}
	if got := F16ToF32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("F16ToF32(0x8000) = %g, want -0", got)
	}
	for _, h := range []uint16{0x7E00, 0x7C01, 0xFE00} {
		if got := F16ToF32(h); !math.IsNaN(float64(got)) {
			t.Errorf("F16ToF32(%#04x) = %g, want NaN", h, got)
		}
	}
	// Every non-NaN half survives a round trip through float32.
	for h := 0; h < 1<<16; h++ {
		if h&0x7C00 == 0x7C00 && h&0x03FF != 0 {
			continue
		}
		if back := F32ToF16(F16ToF32(uint16(h))); back != uint16(h) {
			t.Fatalf("round trip %#04x -> %g -> %#04x", h, F16ToF32(uint16(h)), back)
		}
	}
}

func TestBF16(t *testing.T) {
	if got := BF16ToF32(0x3F80); got != 1 {
		t.Errorf("BF16ToF32(0x3F80) = %g, want 1", got)
	}
	if got := BF16ToF32(0xC0A0); got != -5 {
		t.Errorf("BF16ToF32(0xC0A0) = %g, want -5", got)
	}
	cases := []struct {
		bits uint32
		want uint16
	}{
		{0x3F808000, 0x3F80}, // tie, even stays
		{0x3F818000, 0x3F82}, // tie, odd rounds up
		{0x3F808001, 0x3F81}, // above tie
		{0x7F7FFFFF, 0x7F80}, // max float rounds to Inf
	}
	for _, c := range cases {
		if got := F32ToBF16(math.Float32frombits(c.bits)); got != c.want {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", c.bits, got, c.want)
		}
	}
	if got := F32ToBF16(float32(math.NaN())); got&0x7F80 != 0x7F80 || got&0x7F == 0 {
		t.Errorf("F32ToBF16(NaN) = %#04x, not a NaN", got)
	}
}

// TestF32sToF16 compares the bulk conversion with F32ToF16 on every float32
// whose low 13 bits (the ones half precision rounds away) are one of the
// rounding cases, around every exponent, plus NaNs in every chunk position
// and every tail length.
func TestF32sToF16(t *testing.T) {
	var src []float32
	for e := uint32(0); e < 256; e++ {
		for _, low := range []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x0800} {
			for _, m := range []uint32{0, 1 << 13, 0x3ff << 13, 0x155 << 13} {
				for _, sign := range []uint32{0, 1 << 31} {
					src = append(src, math.Float32frombits(sign|e<<23|m|low))
				}
			}
		}
	}
	check := func(name string, src []float32) {
		t.Helper()
		got := make([]uint16, len(src)+1)
		got[len(src)] = 0xbeef
		F32sToF16(got, src)
		for i, f := range src {
			if want := F32ToF16(f); got[i] != want {
				t.Fatalf("%s: element %d (%#08x): %#04x, want %#04x", name, i, math.Float32bits(f), got[i], want)
			}
		}
		if got[len(src)] != 0xbeef {
			t.Fatalf("%s: wrote past len(src)", name)
		}
	}
	check("grid", src)
	nan := math.Float32frombits(0x7fc00123)
	for n := 0; n <= 40; n++ {
		check(fmt.Sprintf("len %d", n), src[:n])
		for at := 0; at < n; at += 7 {
			s := append([]float32(nil), src[:n]...)
			s[at] = nan
			check(fmt.Sprintf("len %d NaN at %d", n, at), s)
		}
	}
}

// TestF16sToF32 compares the bulk conversion with the table on every half,
// at every offset of a 16-element chunk and every tail length.
func TestF16sToF32(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	for shift := range 17 {
		s := src[shift:]
		got := make([]float32, len(s)+1)
		got[len(s)] = 42
		F16sToF32(got, s)
		for i, h := range s {
			if math.Float32bits(got[i]) != math.Float32bits(F16ToF32(h)) {
				t.Fatalf("shift %d: %#04x -> %#08x, want %#08x", shift, h, math.Float32bits(got[i]), math.Float32bits(F16ToF32(h)))
			}
		}
		if got[len(s)] != 42 {
			t.Fatal("wrote past len(src)")
		}
	}
}
