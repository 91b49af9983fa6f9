package ggml

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// matrix builds n random rows of k elements of type typ.
func matrix(t *testing.T, rng *rand.Rand, typ Type, k, n int) []byte {
	t.Helper()
	var w []byte
	for range n {
		w = append(w, randomRow(t, rng, typ, k)...)
	}
	return w
}

// rowLengths are the row lengths a type allows in a test: any for the plain
// types (tails of every size), whole blocks otherwise.
func rowLengths(typ Type) []int {
	if typ.BlockSize() == 1 {
		return []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 80, 100, 112, 172, 257, 768}
	}
	bs := typ.BlockSize()
	return []int{bs, 2 * bs, 3 * bs, 768 / bs * bs, 2048 / bs * bs}
}

func sameBits(a, b []float32) (int, bool) {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return 0, true
}

// TestKernelsMatVecBitIdentical: every implementation's MatVec equals the
// generic one bit for bit, for every exact type, row count (groups of 4, 2
// and single rows) and row length.
func TestKernelsMatVecBitIdentical(t *testing.T) {
	for _, k := range Available() {
		if k == Generic {
			continue
		}
		for _, typ := range exactTypes {
			t.Run(fmt.Sprintf("%s/%s", k.Name(), typ), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(typ), 7))
				for _, K := range rowLengths(typ) {
					for _, N := range []int{1, 2, 3, 4, 5, 7, 8, 13} {
						w := matrix(t, rng, typ, K, N)
						x := randVec(rng, K)
						want, got := make([]float32, N), make([]float32, N)
						Generic.MatVec(typ, w, x, want)
						k.MatVec(typ, w, x, got)
						if i, ok := sameBits(want, got); !ok {
							t.Fatalf("K=%d N=%d: row %d: %s gives %v (%#08x), generic %v (%#08x)", K, N, i,
								k.Name(), got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			})
		}
	}
}

// TestKernelsMatMulBitIdentical: MatMul (the prefill path) equals the generic
// one for activation row counts around the tile sizes and strided outputs.
func TestKernelsMatMulBitIdentical(t *testing.T) {
	for _, k := range Available() {
		if k == Generic {
			continue
		}
		for _, typ := range exactTypes {
			t.Run(fmt.Sprintf("%s/%s", k.Name(), typ), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(typ), 8))
				lengths := rowLengths(typ)
				Ks := []int{lengths[0], lengths[len(lengths)/2], lengths[len(lengths)-1]}
				if typ.BlockSize() == 1 {
					Ks = append(Ks, 80) // a 64-element block and a 16-element chunk
				}
				for _, K := range Ks {
					for _, N := range []int{1, 4, 6, 9} {
						for _, T := range []int{2, 7, 8, 9, 17, 70} {
							w := matrix(t, rng, typ, K, N)
							x := randVec(rng, T*K)
							ldo := N + 3
							want, got := make([]float32, T*ldo), make([]float32, T*ldo)
							for i := range got {
								want[i], got[i] = -1, -1 // the gaps must stay untouched
							}
							Generic.MatMul(typ, w, N, x, T, want, ldo)
							k.MatMul(typ, w, N, x, T, got, ldo)
							if i, ok := sameBits(want, got); !ok {
								t.Fatalf("K=%d N=%d T=%d: out[%d][%d]: %s gives %v, generic %v", K, N, T, i/ldo, i%ldo, k.Name(), got[i], want[i])
							}
						}
					}
				}
			})
		}
	}
}

// TestKernelsSpecialValues: zeros of both signs, infinities and huge values
// (products that overflow) round the same way in every implementation.
func TestKernelsSpecialValues(t *testing.T) {
	special := []float32{0, float32(math.Copysign(0, -1)), 1e38, -1e38, 3e-39, float32(math.Inf(1)), float32(math.Inf(-1))}
	rng := rand.New(rand.NewPCG(9, 9))
	for _, k := range Available() {
		if k == Generic {
			continue
		}
		for _, typ := range []Type{F32, F16, BF16} {
			for _, K := range []int{37, 48} { // with a tail, and the avx2 set's multiples of 16
				specialValuesRows(t, k, typ, K, special, rng)
			}
		}
	}
}

// specialValuesRows compares k's MatVec of 6 rows of K special values with
// the generic one.
func specialValuesRows(t *testing.T, k Kernels, typ Type, K int, special []float32, rng *rand.Rand) {
	t.Helper()
	const N = 6
	wf := make([]float32, K*N)
	x := make([]float32, K)
	for i := range wf {
		wf[i] = special[rng.IntN(len(special))]
	}
	for i := range x {
		x[i] = special[rng.IntN(len(special)-2)] // no Inf: Inf*0 is NaN, whose payload may differ
	}
	w := make([]byte, mustRowBytes(typ, K*N))
	if err := Quantize(typ, wf, w); err != nil {
		t.Fatal(err)
	}
	want, got := make([]float32, N), make([]float32, N)
	Generic.MatVec(typ, w, x, want)
	k.MatVec(typ, w, x, got)
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
			t.Errorf("%s %s K=%d row %d: %v, generic %v", k.Name(), typ, K, i, got[i], want[i])
		}
	}
}

func TestGenericIsAlwaysAvailableAndLast(t *testing.T) {
	if got := Available()[len(Available())-1]; got != Generic {
		t.Fatalf("last available kernels %s, want generic", got.Name())
	}
}

func eachSIMD(t *testing.T, fn func(t *testing.T, k Kernels)) {
	for _, k := range Available() {
		if k != Generic {
			t.Run(k.Name(), func(t *testing.T) { fn(t, k) })
		}
	}
}

func expectSame(t *testing.T, what string, want, got []float32) {
	t.Helper()
	if i, ok := sameBits(want, got); !ok {
		t.Fatalf("%s: [%d] = %v (%#08x), generic %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
	}
}

// TestKernelsAttentionBitIdentical: the attention kernels (scores, the
// probability-weighted sum of V in both lane orders) equal the generic
// emulation of llama.cpp's AVX-512 code for head sizes with and without
// leftovers and sequence lengths around the lane counts.
func TestKernelsAttentionBitIdentical(t *testing.T) {
	eachSIMD(t, func(t *testing.T, k Kernels) {
		rng := rand.New(rand.NewPCG(11, 12))
		for _, d := range []int{1, 8, 17, 64, 100, 128} {
			for _, n := range []int{1, 5, 16, 63, 64, 65, 130, 300} {
				stride := d + 3
				kv := randVec(rng, n*stride)
				q := randVec(rng, d)
				want, got := make([]float32, n), make([]float32, n)
				Generic.ScoreRows(kv, stride, q, want)
				k.ScoreRows(kv, stride, q, got)
				expectSame(t, fmt.Sprintf("ScoreRows d=%d n=%d", d, n), want, got)

				p := randVec(rng, n)
				for _, lanes := range []int{16, 64} {
					want, got := make([]float32, d), make([]float32, d)
					Generic.WeightedColumns(kv, stride, p, lanes, want)
					k.WeightedColumns(kv, stride, p, lanes, got)
					expectSame(t, fmt.Sprintf("WeightedColumns lanes=%d d=%d n=%d", lanes, d, n), want, got)
				}
			}
		}
	})
}

// TestKernelsSoftmaxSwiglu: softmax and SwiGLU, including the flush of
// ggml_v_expf to 0 and +Inf beyond |n| > 192 and masked (-Inf) scores.
func TestKernelsSoftmaxSwiglu(t *testing.T) {
	eachSIMD(t, func(t *testing.T, k Kernels) {
		rng := rand.New(rand.NewPCG(13, 14))
		for _, n := range []int{1, 2, 15, 16, 17, 64, 100, 257} {
			for _, scale := range []float32{1, 0.125, 30} {
				x := randVec(rng, n)
				for i := range x {
					x[i] *= 8
				}
				if n > 3 {
					x[n-1] = float32(math.Inf(-1))
				}
				want, got := append([]float32(nil), x...), append([]float32(nil), x...)
				Generic.Softmax(want, scale)
				k.Softmax(got, scale)
				expectSame(t, fmt.Sprintf("Softmax n=%d scale=%g", n, scale), want, got)
			}
		}
		for _, n := range []int{1, 15, 16, 33, 2048, 2050} {
			g, u := randVec(rng, n), randVec(rng, n)
			for i := range g {
				g[i] *= 10
			}
			if n >= 16 {
				g[0], g[1], g[2], g[3] = 200, -200, 88.7, -104
			}
			want, got := make([]float32, n), make([]float32, n)
			Generic.Swiglu(want, g, u)
			k.Swiglu(got, g, u)
			expectSame(t, fmt.Sprintf("Swiglu n=%d", n), want, got)
		}
	})
}

// TestFMA32 against an exact a·b+c rounded once, on random operands of
// every magnitude and on results that land halfway between two float32
// values after the float64 rounding, normal and subnormal.
func TestFMA32(t *testing.T) {
	exact := func(a, b, c float32) float32 { // big.Rat: not the code under test
		x := new(big.Rat).SetFloat64(float64(a))
		x.Mul(x, new(big.Rat).SetFloat64(float64(b)))
		x.Add(x, new(big.Rat).SetFloat64(float64(c)))
		if x.Sign() == 0 { // a Rat has no -0: float64's exact a·b and sum give IEEE's sign
			return float32(float64(a)*float64(b) + float64(c))
		}
		f, _ := x.Float32()
		return f
	}
	f32 := math.Float32frombits
	cases := [][3]float32{
		// a subnormal result the float64 rounding puts halfway (rounded
		// again to float32 it gives 0x00400002, not 0x00400001)
		{0x1.fffffcp-25, f32(0x00800001), f32(0x00400001)},
		{0x1.fffffcp-25, -f32(0x00800001), -f32(0x00400001)},
		// a normal one: 1 + 2^-24 (halfway) + 2^-80 (lost by float64)
		{1 + 0x1p-23, 1 + 0x1p-23, -(0x1p-22 + 0x1p-46)},
		// halfway near the float32 maximum with the smallest c (an exact
		// redo in 256 bits gives 0x7f000000, not 0x7f000001)
		{f32(0x64c2c200), f32(0x59a84000), f32(0x00000001)},
		// tiny results of either sign, and zeros
		{0x1p-100, -0x1p-100, 0}, {0x1p-75, 0x1p-75, f32(1)}, {3, 5, -15}, {-3, 5, 15},
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for range 200000 {
		e := func() float32 { return float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(276)-149)) }
		cases = append(cases, [3]float32{e(), e(), e()})
	}
	for _, c := range cases {
		if got, want := FMA32(c[0], c[1], c[2]), exact(c[0], c[1], c[2]); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("FMA32(%g, %g, %g) = %g (%#08x), exactly rounded %g (%#08x)", c[0], c[1], c[2], got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// TestKernelsRope: rope of one head, llama and NeoX pairing, for head sizes
// with and without leftovers past the kernels' blocks, equals the generic
// FMA32 code (a rotation rounded twice, or fused differently, does not):
// random values, then zeros, subnormals, a result FMA32 must round from
// halfway, Inf and NaN against position 0's (cos, sin) = (1, 0) and a
// cosine of 0; values past nDims are left alone.
func TestKernelsRope(t *testing.T) {
	f32 := math.Float32frombits
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -3e-39, f32(0x00800001), -f32(0x00400001),
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), f32(0x7fc01234), f32(0xffa00001), 3}
	eachSIMD(t, func(t *testing.T, k Kernels) {
		rng := rand.New(rand.NewPCG(15, 16))
		for _, nDims := range []int{0, 2, 6, 14, 16, 18, 30, 32, 48, 64, 80, 96, 128, 256} {
			for _, neox := range []bool{false, true} {
				for round := range 4 {
					x := randVec(rng, nDims+5)
					for i := range x {
						x[i] *= 8
					}
					cs := make([]float32, nDims)
					for i := 0; i < nDims; i += 2 {
						a := rng.Float64() * 2 * math.Pi
						cs[i], cs[i+1] = float32(math.Cos(a)), float32(math.Sin(a))
					}
					if round > 0 { // specials at random places, either side of a pair
						for i := range nDims {
							if rng.IntN(3) == 0 {
								x[i] = special[rng.IntN(len(special))]
							}
						}
						for i := 0; i < nDims; i += 2 {
							switch rng.IntN(4) {
							case 0:
								cs[i], cs[i+1] = 1, 0 // position 0
							case 1:
								cs[i], cs[i+1] = 0, 1
							case 2:
								cs[i], cs[i+1] = 0x1.fffffcp-25, 1 // with the subnormal pair above: a halfway FMA32
							}
						}
					}
					if round == 1 && nDims >= 2 { // the first pair rounds from halfway in FMA32
						b := 1
						if neox {
							b = nDims / 2
						}
						x[0], x[b], cs[0], cs[1] = f32(0x00800001), -f32(0x00400001), 0x1.fffffcp-25, 1
					}
					want, got := append([]float32(nil), x...), append([]float32(nil), x...)
					Generic.Rope(want, cs, nDims, neox)
					k.Rope(got, cs, nDims, neox)
					expectSame(t, fmt.Sprintf("Rope nDims=%d neox=%v round %d", nDims, neox, round), want, got)
					expectSame(t, "past nDims", x[nDims:], got[nDims:])
				}
			}
		}
	})
}

// ggmlActivations are random rows with the awkward cases of activation
// quantization: an all-zero block, ties at .5 after scaling, tiny values.
func ggmlActivations(rng *rand.Rand, rows, k int) []float32 {
	x := randVec(rng, rows*k)
	if k >= 64 {
		clear(x[32:64])                   // amax = 0 block
		x[0], x[1], x[2] = 127, 0.5, -2.5 // scaled by exactly 1: ties
		x[k-1] = 1e-30
	}
	return x
}

// TestKernelsGGMLBitIdentical: the ggml-numerics kernels (activation
// conversion and every llama.cpp kernel the engine picks) equal the generic
// code bit for bit.
func TestKernelsGGMLBitIdentical(t *testing.T) {
	eachSIMD(t, func(t *testing.T, k Kernels) {
		rng := rand.New(rand.NewPCG(31, 32))
		for _, typ := range []Type{F32, F16, Q8_0, Q4_0, Q4_1, Q6_K} {
			for _, K := range rowLengths(typ) {
				if typ.BlockSize() == 1 && K%16 != 0 && K != 172 && K != 257 {
					continue
				}
				for _, N := range []int{1, 3, 5, 7, 8, 12, 16, 17, 23, 40} {
					for _, T := range []int{1, 2, 3, 5, 8} {
						w := matrix(t, rng, typ, K, N)
						x := ggmlActivations(rng, T, K)
						var ga, ka GGMLActivations
						if err := Generic.PrepareGGML(typ, x, T, &ga); err != nil {
							t.Fatal(err)
						}
						if err := k.PrepareGGML(typ, x, T, &ka); err != nil {
							t.Fatal(err)
						}
						if string(ga.Q) != string(ka.Q) || ga.QStride != ka.QStride {
							t.Fatalf("%s K=%d T=%d: quantized activations differ", typ, K, T)
						}
						if i, ok := sameBits(ga.F, ka.F); !ok {
							t.Fatalf("%s K=%d T=%d: float activations [%d]: %v vs %v", typ, K, T, i, ka.F[i], ga.F[i])
						}
						kinds := []GGMLKernel{GGMLKernelFor(typ, T, K, N)}
						switch typ {
						case F32, F16:
							kinds = append(kinds, GGMLVecDot)
							if K%16 == 0 {
								kinds = append(kinds, GGMLTinyBLAS)
							}
						case Q4_0:
							kinds = append(kinds, GGMLQ4_0x8, GGMLQ4_0AVX)
						}
						for _, kind := range kinds {
							ldo := N + 2
							want, got := make([]float32, T*ldo), make([]float32, T*ldo)
							Generic.MatMulGGML(kind, typ, w, N, &ga, want, ldo)
							k.MatMulGGML(kind, typ, w, N, &ka, got, ldo)
							if i, ok := sameBits(want, got); !ok {
								t.Fatalf("%s kernel %d K=%d N=%d T=%d: out[%d][%d] = %v, generic %v", typ, kind, K, N, T, i/ldo, i%ldo, got[i], want[i])
							}
						}
					}
				}
			}
		}
	})
}

// TestKernelsGGMLPrefillRows: the multi-row Q8_0 and Q4_0 kernels (a weight
// block shared by a tile of activation rows) give every output the bits
// the single-row kernel gives it, for every count of activation rows modulo
// the tiles (2 and 8 rows) and weight rows beyond the 16-row panels.
func TestKernelsGGMLPrefillRows(t *testing.T) {
	eachSIMD(t, func(t *testing.T, k Kernels) {
		rng := rand.New(rand.NewPCG(41, 42))
		for _, typ := range []Type{Q8_0, Q4_0} {
			for _, K := range []int{32, 96, 768} {
				for _, N := range []int{16, 20, 35, 48} {
					w := matrix(t, rng, typ, K, N)
					for T := 2; T <= 19; T++ {
						x := ggmlActivations(rng, T, K)
						if T == 3 {
							x[K+5] = 3e38 // a block quantized from a huge value
						}
						kind := GGMLKernelFor(typ, T, K, N)
						var a GGMLActivations
						if err := k.PrepareGGML(typ, x, T, &a); err != nil {
							t.Fatal(err)
						}
						ldo := N + 3
						got := make([]float32, T*ldo)
						k.MatMulGGML(kind, typ, w, N, &a, got, ldo)
						for i := range T {
							var one GGMLActivations
							if err := k.PrepareGGML(typ, x[i*K:(i+1)*K], 1, &one); err != nil {
								t.Fatal(err)
							}
							want := make([]float32, N)
							k.MatMulGGML(kind, typ, w, N, &one, want, N)
							if j, ok := sameBits(want, got[i*ldo:i*ldo+N]); !ok {
								t.Fatalf("%s K=%d N=%d T=%d: out[%d][%d] = %v, single row %v", typ, K, N, T, i, j, got[i*ldo+j], want[j])
							}
						}
						// The same activations prepared by the generic code (no
						// multi-row tables) into a holding another batch's: those
						// must not be read.
						if err := k.PrepareGGML(typ, ggmlActivations(rng, T, K), T, &a); err != nil {
							t.Fatal(err)
						}
						if err := Generic.PrepareGGML(typ, x, T, &a); err != nil {
							t.Fatal(err)
						}
						again := make([]float32, T*ldo)
						k.MatMulGGML(kind, typ, w, N, &a, again, ldo)
						if i, ok := sameBits(got, again); !ok {
							t.Fatalf("%s K=%d N=%d T=%d: generic-prepared out[%d] = %v, %v", typ, K, N, T, i, again[i], got[i])
						}
					}
				}
			}
		}
	})
}

// TestSelectKernels: EVALRUN_KERNELS names a set this machine runs, or is
// refused with the sets it can run.
func TestSelectKernels(t *testing.T) {
	if k, err := Select(""); err != nil || k != Best() {
		t.Fatalf(`Select("") = %v, %v; want Best()`, k, err)
	}
	for _, want := range Available() {
		if k, err := Select(want.Name()); err != nil || k != want {
			t.Errorf("Select(%q) = %v, %v", want.Name(), k, err)
		}
	}
	if _, err := Select("avx1024"); err == nil || !strings.Contains(err.Error(), "EVALRUN_KERNELS=avx1024: no such kernel set") {
		t.Errorf("unknown set: %v", err)
	}
	for _, name := range KernelSets {
		if !slices.ContainsFunc(Available(), func(k Kernels) bool { return k.Name() == name }) {
			_, err := Select(name) // e.g. avx512 on arm64 (make test-arm64)
			if err == nil || !strings.Contains(err.Error(), "cannot run the "+name+" kernels (it runs ") {
				t.Errorf("Select(%q) on a machine without it: %v", name, err)
			}
		}
	}
}

// TestWeightedColumnsZeroPadding: in the 64-lane order the generic code
// runs fma(0, 0, acc) for p's zero padding (llama.cpp's KV cache is padded
// with zero rows), which turns a lane's -0 into +0; every set does too, so a
// column of tiny negative products (underflowing to -0) sums to +0.
func TestWeightedColumnsZeroPadding(t *testing.T) {
	for _, k := range Available() {
		for _, n := range []int{65, 100, 130} {
			const d = 5
			v, h, p := make([]float32, n*d), make([]uint16, n*d), make([]float32, n)
			for i := range v {
				v[i], h[i] = -1e-30, F32ToF16(-1e-30) // -0 in binary16
			}
			for i := range p {
				p[i] = 1e-30
			}
			want, got := make([]float32, d), make([]float32, d)
			Generic.WeightedColumns(v, d, p, 64, want)
			k.WeightedColumns(v, d, p, 64, got)
			expectSame(t, fmt.Sprintf("%s n=%d", k.Name(), n), want, got)
			WeightedColumnsF16(Generic, h, d, p, 64, want)
			WeightedColumnsF16(k, h, d, p, 64, got)
			expectSame(t, fmt.Sprintf("%s f16 n=%d", k.Name(), n), want, got)
		}
	}
}
