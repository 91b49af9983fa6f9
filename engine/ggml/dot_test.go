package ggml

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// laneDot is the exact-mode order written as plainly as possible: element j
// goes to lane j%16, then lanes i and i+8 are added, then i and i+4, then
// (q0+q2)+(q1+q3).
func laneDot(a, b []float32) float32 {
	var s [16]float32
	for j := range a {
		s[j%16] += float32(a[j] * b[j])
	}
	var h [8]float32
	for i := range h {
		h[i] = s[i] + s[i+8]
	}
	q := [4]float32{h[0] + h[4], h[1] + h[5], h[2] + h[6], h[3] + h[7]}
	return (q[0] + q[2]) + (q[1] + q[3])
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// randScale is a finite half-precision scale of random sign and magnitude.
func randScale(rng *rand.Rand) uint16 {
	v := float32(math.Ldexp(1+rng.Float64(), -rng.IntN(10)))
	if rng.IntN(2) == 0 {
		v = -v
	}
	return F32ToF16(v)
}

// randomRow builds n elements of type t: random quant bits with finite scales.
func randomRow(t *testing.T, rng *rand.Rand, typ Type, n int) []byte {
	t.Helper()
	size, err := RowBytes(typ, n)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	switch typ {
	case F32, F16, BF16:
		if err := Quantize(typ, randVec(rng, n), b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	ts := typ.TypeSize()
	for off := 0; off < len(b); off += ts {
		blk := b[off : off+ts]
		switch typ {
		case Q4_0, Q5_0, Q8_0:
			put16(blk, 0, randScale(rng))
		case Q4_1, Q5_1, Q4_K, Q5_K:
			put16(blk, 0, randScale(rng))
			put16(blk, 2, randScale(rng))
		case Q6_K:
			put16(blk, 208, randScale(rng))
		case Q8_K:
			binary.LittleEndian.PutUint32(blk, math.Float32bits(F16ToF32(randScale(rng))))
		case MXFP4:
			blk[0] = byte(110 + rng.IntN(30)) // 2^-18 .. 2^11: finite products
		default:
			t.Fatalf("randomRow: no layout for %s", typ)
		}
	}
	return b
}

var exactTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K, MXFP4}

func TestDotF32Order(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 64, 172, 1000, 4099} {
		a, b := randVec(rng, n), randVec(rng, n)
		got, want := DotF32(a, b), laneDot(a, b)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("n=%d: DotF32 = %g, lane order gives %g", n, got, want)
		}
		var exact float64
		for i := range a {
			exact += float64(a[i]) * float64(b[i])
		}
		if math.Abs(float64(got)-exact) > 1e-4*math.Sqrt(float64(n+1)) {
			t.Errorf("n=%d: DotF32 = %g, float64 dot %g", n, got, exact)
		}
	}
	if got := DotF32([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}); got != 385 {
		t.Errorf("1..10 · 1..10 = %g, want 385", got)
	}
}

// TestDotRowMatchesDequantize checks the exact-mode contract: DotRow equals
// DotF32 over the dequantized row bit for bit, for every supported type.
func TestDotRowMatchesDequantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range exactTypes {
		lengths := []int{32, 64, 96, 256, 4096}
		switch typ.BlockSize() {
		case 1:
			lengths = append(lengths, 1, 7, 172, 4099)
		case 256:
			lengths = []int{256, 512, 4096}
		}
		for _, n := range lengths {
			for rep := 0; rep < 3; rep++ {
				w := randomRow(t, rng, typ, n)
				x := randVec(rng, n)
				deq := make([]float32, n)
				if err := Dequantize(typ, w, deq); err != nil {
					t.Fatal(err)
				}
				got, want := DotRow(typ, w, x), DotF32(deq, x)
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%s n=%d: DotRow = %g (%#x), DotF32(dequantized) = %g (%#x)",
						typ, n, got, math.Float32bits(got), want, math.Float32bits(want))
				}
				if math.IsNaN(float64(got)) || math.IsInf(float64(got), 0) {
					t.Fatalf("%s n=%d: non-finite result %g", typ, n, got)
				}
			}
		}
	}
}

// TestDotRowF32PortablePath runs the identity check through the byte-decoding
// F32 path that big-endian hosts use.
func TestDotRowF32PortablePath(t *testing.T) {
	defer func(v bool) { littleEndian = v }(littleEndian)
	littleEndian = false
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{1, 8, 13, 172, 4096} {
		w := randomRow(t, rng, F32, n)
		x := randVec(rng, n)
		deq := make([]float32, n)
		if err := Dequantize(F32, w, deq); err != nil {
			t.Fatal(err)
		}
		if got, want := DotRow(F32, w, x), DotF32(deq, x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n=%d: portable DotRow(F32) = %g, DotF32 = %g", n, got, want)
		}
	}
}

func TestDotRowBadLengthPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("DotRow with a short row did not panic")
		}
	}()
	DotRow(Q8_0, make([]byte, 33), make([]float32, 32))
}
