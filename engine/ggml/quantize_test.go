package ggml

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func quantize(t *testing.T, typ Type, x []float32) []byte {
	t.Helper()
	n, err := RowBytes(typ, len(x))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if err := Quantize(typ, x, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func activations(t *testing.T, typ Type, x []float32) []byte {
	t.Helper()
	n, err := RowBytes(VecDotType(typ), len(x))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if err := QuantizeActivations(typ, x, b); err != nil {
		t.Fatal(err)
	}
	return b
}

func block(x map[int]float32, n int) []float32 {
	v := make([]float32, n)
	for i, f := range x {
		v[i] = f
	}
	return v
}

func expectBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got % x\nwant % x", what, got, want)
	}
}

// q8Hand has amax 127 (so d = 1 and both quantizers scale by exactly 1) and
// three halfway cases that tell roundf from round-half-even.
var q8Hand = block(map[int]float32{0: 127, 1: 2.5, 2: -2.5, 3: 0.5, 4: 1.5, 5: -127}, 32)

func TestQuantizeQ8_0Ref(t *testing.T) {
	want := make([]byte, 34)
	put16(want, 0, h1)
	copy(want[2:], []byte{127, 3, 0xFD, 1, 2, 0x81}) // roundf: halves away from zero
	expectBytes(t, "Q8_0 ref", quantize(t, Q8_0, q8Hand), want)

	want1 := make([]byte, 36)
	put16(want1, 0, h1)
	put16(want1, 2, 0x4200) // s = 1 * (127+3-3+1+2-127) = 3
	copy(want1[4:], []byte{127, 3, 0xFD, 1, 2, 0x81})
	expectBytes(t, "Q8_1 ref", quantize(t, Q8_1, q8Hand), want1)
}

func TestQuantizeActivationsQ8X86(t *testing.T) {
	want := make([]byte, 34)
	put16(want, 0, h1)
	copy(want[2:], []byte{127, 2, 0xFE, 0, 2, 0x81}) // halves to even, as _mm256_round_ps
	for _, typ := range []Type{Q8_0, Q4_0, Q5_0} {
		expectBytes(t, "Q8_0 activations for "+typ.String(), activations(t, typ, q8Hand), want)
	}
	want1 := make([]byte, 36)
	put16(want1, 0, h1)
	put16(want1, 2, h2) // s = 1 * (127+2-2+0+2-127) = 2
	copy(want1[4:], []byte{127, 2, 0xFE, 0, 2, 0x81})
	for _, typ := range []Type{Q4_1, Q5_1} {
		expectBytes(t, "Q8_1 activations for "+typ.String(), activations(t, typ, q8Hand), want1)
	}

	// A realistic block: d = amax/127 rounded to f16, q = RNE(x*127/amax).
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j-16) / 4 // amax 4: x*31.75, element 8 (x = -2) is a tie at -63.5
	}
	got := activations(t, Q8_0, x)
	if d := binary.LittleEndian.Uint16(got); d != F32ToF16(float32(4)/127) {
		t.Errorf("d = %#04x, want f16(4/127) = %#04x", d, F32ToF16(float32(4)/127))
	}
	for j := range x {
		want := int8(math.RoundToEven(float64(x[j]) * 31.75))
		if q := int8(got[2+j]); q != want {
			t.Errorf("q[%d] = %d, want %d", j, q, want)
		}
	}
	if int8(got[2+8]) != -64 {
		t.Errorf("tie -63.5 quantized to %d, want -64 (even)", int8(got[2+8]))
	}
}

func TestQuantizeActivationsQ8_K(t *testing.T) {
	// max = -127/32 so iscale = 32 exactly; 62.5 and 63.5 are ties (to even).
	x := block(map[int]float32{0: -3.96875, 1: 1.953125, 2: 1.984375, 3: -1, 17: 0.5}, 256)
	want := make([]byte, 292)
	binary.LittleEndian.PutUint32(want, math.Float32bits(1.0/32))
	copy(want[4:], []byte{0x81, 62, 64, 0xE0})
	want[4+17] = 16
	put16(want, 260, uint16(0x10000-33)) // bsums[0] = -127+62+64-32
	put16(want, 262, 16)
	for _, typ := range []Type{Q4_K, Q5_K, Q6_K} {
		expectBytes(t, "Q8_K activations for "+typ.String(), activations(t, typ, x), want)
	}
	expectBytes(t, "Q8_K ref", quantize(t, Q8_K, x), want)

	zero := make([]float32, 256)
	expectBytes(t, "Q8_K of zeros", activations(t, Q4_K, zero), make([]byte, 292))
}

func TestQuantizeActivationsFloat(t *testing.T) {
	x := []float32{1 + 1.0/2048, 1 + 3.0/2048, 65520, -0.1}
	got := activations(t, F16, x)
	want := []uint16{0x3C00, 0x3C02, 0x7C00, F32ToF16(-0.1)}
	for i, w := range want {
		if h := binary.LittleEndian.Uint16(got[2*i:]); h != w {
			t.Errorf("F16 activation %d = %#04x, want %#04x", i, h, w)
		}
	}
	f := activations(t, F32, x)
	for i := range x {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(f[4*i:])); v != x[i] {
			t.Errorf("F32 activation %d = %g, want %g", i, v, x[i])
		}
	}
}

func TestQuantizeLegacyHand(t *testing.T) {
	// Q4_0: max = -8 so d = 1; q = min(15, trunc(x + 8.5)).
	x := block(map[int]float32{0: -8, 1: 7, 2: 8, 3: 0.5, 16: 0.4, 17: -0.5, 18: -0.6}, 32)
	want := []byte{0x00, 0x3C, 0x80, 0x8F, 0x7F, 0x89}
	want = append(want, bytes.Repeat([]byte{0x88}, 12)...)
	expectBytes(t, "Q4_0", quantize(t, Q4_0, x), want)

	// Q4_1: min -1, max 14 so d = 1, m = -1; q = min(15, trunc(x+1 + 0.5)).
	x = block(map[int]float32{0: -1, 1: 14, 2: 0.49, 3: 0.5}, 32)
	want = []byte{0x00, 0x3C, 0x00, 0xBC, 0x10, 0x1F, 0x11, 0x12}
	want = append(want, bytes.Repeat([]byte{0x11}, 12)...)
	expectBytes(t, "Q4_1", quantize(t, Q4_1, x), want)

	// Q5_0: max = 16 so d = -1; q = min(31, trunc(-x + 16.5)); 16 -> 0, zeros -> 16.
	x = block(map[int]float32{0: 16, 1: -15, 16: -16, 2: 1}, 32)
	want = []byte{0x00, 0xBC, 0xFA, 0xFF, 0xFF, 0xFF, 0xF0, 0x0F, 0x0F}
	want = append(want, make([]byte, 13)...)
	expectBytes(t, "Q5_0", quantize(t, Q5_0, x), want)

	// Q5_1: min 0, max 31 so d = 1, m = 0; q = trunc(x + 0.5).
	x = block(map[int]float32{0: 31, 1: 16.4, 2: 0.5}, 32)
	want = []byte{0x00, 0x3C, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x0F, 0x00, 0x01}
	want = append(want, make([]byte, 13)...)
	expectBytes(t, "Q5_1", quantize(t, Q5_1, x), want)
}

// TestQuantizeRoundTrip bounds the reconstruction error by the block step.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// steps: error bound in units of |d| (0-types can clamp the extreme of
	// the opposite sign by one whole step), plus f16 rounding of d and m.
	cases := []struct {
		typ   Type
		steps float64
	}{{Q8_0, 0.5}, {Q4_0, 1}, {Q5_0, 1}, {Q4_1, 0.5}, {Q5_1, 0.5}}
	for _, c := range cases {
		x := randVec(rng, 4096)
		for i := range x {
			x[i] *= float32(math.Ldexp(1, i/512-4)) // blocks of different scales
		}
		b := quantize(t, c.typ, x)
		y := dequant(t, c.typ, b)
		ts := c.typ.TypeSize()
		for ib := 0; ib < len(x)/32; ib++ {
			d := math.Abs(float64(F16ToF32(binary.LittleEndian.Uint16(b[ib*ts:]))))
			amax := 0.0
			for _, v := range x[32*ib : 32*ib+32] {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			bound := c.steps*d + 40*amax/2048 + 1e-7 // q*(d error) + m error
			for j := 32 * ib; j < 32*ib+32; j++ {
				if e := math.Abs(float64(y[j] - x[j])); e > bound {
					t.Fatalf("%s block %d elem %d: |%g - %g| = %g > %g (d=%g)", c.typ, ib, j, y[j], x[j], e, bound, d)
				}
			}
		}
	}
	x := randVec(rng, 1000)
	for _, typ := range []Type{F16, BF16} {
		y := dequant(t, typ, quantize(t, typ, x))
		rel := math.Ldexp(1, -11)
		if typ == BF16 {
			rel = math.Ldexp(1, -8)
		}
		for i := range x {
			if e := math.Abs(float64(y[i] - x[i])); e > rel*math.Abs(float64(x[i])) {
				t.Fatalf("%s: %g -> %g", typ, x[i], y[i])
			}
		}
	}
	y := dequant(t, F32, quantize(t, F32, x))
	for i := range x {
		if y[i] != x[i] {
			t.Fatalf("F32 round trip changed %g to %g", x[i], y[i])
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	if err := Quantize(Q2_K, make([]float32, 256), make([]byte, 84)); err == nil || !strings.Contains(err.Error(), "unsupported tensor type Q2_K") {
		t.Errorf("Q2_K: err = %v", err)
	}
	if err := Quantize(Q8_0, make([]float32, 32), make([]byte, 30)); err == nil || !strings.Contains(err.Error(), "Q8_0: 30 bytes for 32 elements, want 34") {
		t.Errorf("short dst: err = %v", err)
	}
	if err := Quantize(Q4_0, make([]float32, 40), make([]byte, 18)); err == nil || !strings.Contains(err.Error(), "not a multiple") {
		t.Errorf("40 elements: err = %v", err)
	}
	if err := QuantizeActivations(IQ2_XS, make([]float32, 256), make([]byte, 74)); err == nil || !strings.Contains(err.Error(), "unsupported tensor type IQ2_XS") {
		t.Errorf("IQ2_XS activations: err = %v", err)
	}
	if err := QuantizeActivations(Q4_0, make([]float32, 32), make([]byte, 18)); err == nil || !strings.Contains(err.Error(), "want 34") {
		t.Errorf("Q4_0 activations into 18 bytes: err = %v", err)
	}
}

// TestQuantizeKQuants checks the K-quant reference quantizers by their
// reconstruction error on Gaussian rows with blocks of very different scales,
// and that all-zero blocks encode as zeros.
func TestQuantizeKQuants(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	// Relative RMS error limits: ggml's K-quants reach about 0.07 (Q4_K),
	// 0.035 (Q5_K) and 0.018 (Q6_K) on Gaussian data.
	limits := map[Type]float64{Q4_K: 0.09, Q5_K: 0.045, Q6_K: 0.025}
	for _, typ := range []Type{Q4_K, Q5_K, Q6_K} {
		x := randVec(rng, 4096)
		for i := range x {
			x[i] *= float32(math.Ldexp(1, i/256-8))
		}
		y := dequant(t, typ, quantize(t, typ, x))
		for ib := 0; ib < len(x)/256; ib++ {
			var se, ss float64
			for j := 256 * ib; j < 256*ib+256; j++ {
				e := float64(y[j] - x[j])
				se += e * e
				ss += float64(x[j]) * float64(x[j])
			}
			if rel := math.Sqrt(se / ss); rel > limits[typ] {
				t.Errorf("%s block %d: relative RMS error %.4f > %.3f", typ, ib, rel, limits[typ])
			}
		}
		zero := quantize(t, typ, make([]float32, 256))
		for _, v := range dequant(t, typ, zero) {
			if v != 0 {
				t.Fatalf("%s of zeros dequantizes to %g", typ, v)
			}
		}
	}
}

// quantizeSymmetricRef is QuantizeSymmetric written with math.Round and
// float comparisons, as the definition reads.
func quantizeSymmetricRef(x []float32, qmax float32, q []int8) (float32, bool) {
	var amax float32
	for _, v := range x {
		a := float32(math.Abs(float64(v)))
		if !(a <= math.MaxFloat32) {
			return 0, false
		}
		amax = max(amax, a)
	}
	if amax == 0 {
		clear(q[:len(x)])
		return 0, true
	}
	scale := amax / qmax
	for i, v := range x {
		r := math.Round(float64(v / scale))
		q[i] = int8(min(max(r, -float64(qmax)), float64(qmax)))
	}
	return scale, true
}

// TestQuantizeSymmetric: the SIMD chunks and the Go tail against the
// definition, on random rows with values on and beside the .5 ties, every
// length up to 70 (chunk boundaries), int8 and int4 ranges, NaN and Inf in
// a chunk and in the tail, and all-zero rows.
func TestQuantizeSymmetric(t *testing.T) {
	q := make([]int8, 5)
	// 0.5·127 = 63.5 rounds away from zero; 0.25·127 = 31.75 → 32.
	if sc, ok := QuantizeSymmetric([]float32{1, -0.5, 0.25, 0, -1}, 127, q); !ok || sc != float32(1)/127 || !slices.Equal(q, []int8{127, -64, 32, 0, -127}) {
		t.Errorf("int8: scale %v ok %v q %v", sc, ok, q)
	}
	// x/0.5: 7, -3.5 → -4, 1.5 → 2, 0.4 → 0.
	if sc, ok := QuantizeSymmetric([]float32{3.5, -1.75, 0.75, 0, 0.2}, 7, q); !ok || sc != 0.5 || !slices.Equal(q, []int8{7, -4, 2, 0, 0}) {
		t.Errorf("int4: scale %v ok %v q %v", sc, ok, q)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	row := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			switch i % 4 {
			case 0:
				x[i] = rng.Float32()*2 - 1
			case 1:
				x[i] = (float32(rng.IntN(255)-127) + 0.5) / 127
			default:
				v := (float32(rng.IntN(255)-127) + 0.5) / 127
				x[i] = math.Nextafter32(v, float32(i%4-2)*2)
			}
		}
		if n > 0 {
			x[rng.IntN(n)] = 1
		}
		return x
	}
	for _, qmax := range []float32{127, 7} {
		for n := 0; n <= 70; n++ {
			for _, bad := range []float32{0, float32(math.NaN()), float32(math.Inf(-1))} {
				x := row(n)
				if bad != 0 {
					if n == 0 {
						continue
					}
					x[rng.IntN(n)] = bad
				}
				got, want := make([]int8, n), make([]int8, n)
				gs, gok := QuantizeSymmetric(x, qmax, got)
				ws, wok := quantizeSymmetricRef(x, qmax, want)
				if gok != wok || gok && (gs != ws || !slices.Equal(got, want)) {
					t.Fatalf("qmax %v n %d bad %v: scale %v ok %v q %v, want %v %v %v", qmax, n, bad, gs, gok, got, ws, wok, want)
				}
			}
		}
		zero := make([]float32, 33)
		q := make([]int8, 33)
		q[5] = 9
		if s, ok := QuantizeSymmetric(zero, qmax, q); !ok || s != 0 || q[5] != 0 {
			t.Errorf("zero row: scale %v ok %v q[5] %d", s, ok, q[5])
		}
	}
}
