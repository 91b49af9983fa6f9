package ggml

import (
	"fmt"
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

// BenchmarkMatVec: one decode-sized matrix (2048 rows of 768, an ffn_up of
// the 768×12 synthetic model) per implementation; MB/s is weight bytes read.
func BenchmarkMatVec(b *testing.B) {
	const K, N = 768, 2048
	for _, typ := range []Type{F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K} {
		rng := rand.New(rand.NewPCG(5, uint64(typ)))
		w := make([]byte, mustRowBytes(typ, K*N))
		if err := Quantize(typ, randVec(rng, K*N), w); err != nil {
			b.Fatal(err)
		}
		x := randVec(rng, K)
		out := make([]float32, N)
		for _, k := range Available() {
			b.Run(fmt.Sprintf("%s/%s", typ, k.Name()), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					k.MatVec(typ, w, x, out)
				}
				b.ReportMetric(float64(K*N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gweights/s")
			})
		}
	}
}

// BenchmarkMatMul: a 128-token prefill through the same matrix.
func BenchmarkMatMul(b *testing.B) {
	const K, N, T = 768, 2048, 128
	for _, typ := range []Type{F32, F16, Q8_0, Q4_0} {
		rng := rand.New(rand.NewPCG(6, uint64(typ)))
		w := make([]byte, mustRowBytes(typ, K*N))
		if err := Quantize(typ, randVec(rng, K*N), w); err != nil {
			b.Fatal(err)
		}
		x := randVec(rng, T*K)
		out := make([]float32, T*N)
		for _, k := range Available() {
			b.Run(fmt.Sprintf("%s/%s", typ, k.Name()), func(b *testing.B) {
				for b.Loop() {
					k.MatMul(typ, w, N, x, T, out, N)
				}
				b.ReportMetric(2*float64(K*N*T)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}

// BenchmarkGGMLMatVec: a decode-sized matmul in ggml numerics (llama.cpp's
// kernels), activations converted once.
func BenchmarkGGMLMatVec(b *testing.B) { benchGGML(b, 1, 7) }

// BenchmarkGGMLMatMul: a 128-token prefill through the same matrix.
func BenchmarkGGMLMatMul(b *testing.B) { benchGGML(b, 128, 8) }

// benchGGML: T activation rows through 2048 weight rows of 768 in ggml
// numerics; Gmacs/s counts weights times rows (Gweights/s at T = 1).
func benchGGML(b *testing.B, T int, seed uint64) {
	const K, N = 768, 2048
	for _, typ := range []Type{F32, F16, Q8_0, Q4_0} {
		rng := rand.New(rand.NewPCG(seed, uint64(typ)))
		w := make([]byte, mustRowBytes(typ, K*N))
		if err := Quantize(typ, randVec(rng, K*N), w); err != nil {
			b.Fatal(err)
		}
		x := randVec(rng, T*K)
		out := make([]float32, T*N)
		for _, k := range Available() {
			b.Run(fmt.Sprintf("%s/%s", typ, k.Name()), func(b *testing.B) {
				var a GGMLActivations
				if err := k.PrepareGGML(typ, x, T, &a); err != nil {
					b.Fatal(err)
				}
				kind := GGMLKernelFor(typ, T, K, N)
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					k.MatMulGGML(kind, typ, w, N, &a, out, N)
				}
				b.ReportMetric(float64(K*N*T)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gmacs/s")
			})
		}
	}
}
