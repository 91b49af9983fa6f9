package ggml

import (
	"math/rand/v2"
	"testing"
)

const benchN = 4096

// benchRow reports weight-read bandwidth (MB/s via SetBytes) and GFLOPS
// (2 flops per element).
func benchRow(b *testing.B, weightBytes int, fn func() float32) {
	b.SetBytes(int64(weightBytes))
	var sink float32
	for b.Loop() {
		sink += fn()
	}
	b.ReportMetric(2*benchN*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
	_ = sink
}

func BenchmarkDotF32(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := randVec(rng, benchN), randVec(rng, benchN)
	benchRow(b, 4*benchN, func() float32 { return DotF32(x, y) })
}

func benchDotRow(b *testing.B, typ Type) {
	rng := rand.New(rand.NewPCG(2, 2))
	x := randVec(rng, benchN)
	w := make([]byte, mustRowBytes(typ, benchN))
	if err := Quantize(typ, randVec(rng, benchN), w); err != nil {
		b.Fatal(err)
	}
	benchRow(b, len(w), func() float32 { return DotRow(typ, w, x) })
}

func BenchmarkDotRowF32(b *testing.B)  { benchDotRow(b, F32) }
func BenchmarkDotRowF16(b *testing.B)  { benchDotRow(b, F16) }
func BenchmarkDotRowQ8_0(b *testing.B) { benchDotRow(b, Q8_0) }
func BenchmarkDotRowQ4_0(b *testing.B) { benchDotRow(b, Q4_0) }

func benchVecDot(b *testing.B, typ Type) {
	rng := rand.New(rand.NewPCG(3, 3))
	w := make([]byte, mustRowBytes(typ, benchN))
	if err := Quantize(typ, randVec(rng, benchN), w); err != nil {
		b.Fatal(err)
	}
	xq := make([]byte, mustRowBytes(VecDotType(typ), benchN))
	if err := QuantizeActivations(typ, randVec(rng, benchN), xq); err != nil {
		b.Fatal(err)
	}
	benchRow(b, len(w), func() float32 { return VecDot(typ, w, xq, benchN) })
}

func BenchmarkVecDotQ8_0(b *testing.B) { benchVecDot(b, Q8_0) }
func BenchmarkVecDotQ4_0(b *testing.B) { benchVecDot(b, Q4_0) }

func BenchmarkQuantizeActivationsQ8_0(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	x := randVec(rng, benchN)
	dst := make([]byte, mustRowBytes(Q8_0, benchN))
	b.SetBytes(4 * benchN)
	for b.Loop() {
		if err := QuantizeActivations(Q8_0, x, dst); err != nil {
			b.Fatal(err)
		}
	}
}

func mustRowBytes(t Type, n int) int {
	size, err := RowBytes(t, n)
	if err != nil {
		panic(err)
	}
	return size
}
