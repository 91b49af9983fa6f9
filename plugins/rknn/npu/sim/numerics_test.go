package sim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// refBlock32 is the documented float numerics, written per element: exact
// products, float32 sums inside each K block of 32, float32 sum of blocks.
func refBlock32(a, b []float32, M, K, N int) []float32 {
	c := make([]float32, M*N)
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			var acc float32
			for k0 := 0; k0 < K; k0 += 32 {
				var s float32
				for k := k0; k < k0+32 && k < K; k++ {
					p := float64(a[m*K+k]) * float64(b[k*N+n]) // exact, and exact in float32
					s = float32(float64(s) + p)
				}
				acc += s
			}
			c[m*N+n] = acc
		}
	}
	return c
}

func randHalf(rng *rand.Rand) float32 {
	// Random fp16 values of mixed magnitude (2^-8..2^8) and sign, exact by construction.
	bits := uint16(rng.IntN(2))<<15 | uint16(7+rng.IntN(17))<<10 | uint16(rng.IntN(1024))
	return float16.Frombits(bits).Float32()
}

// runFloat packs a (M×K) and b (K×N) with the npu packers, runs and returns C.
func runFloat(t testing.TB, d npu.Driver, in *npu.MatmulInfo, a, b []float32) []float32 {
	t.Helper()
	bd := setup(t, d, in)
	M, K, N := int(in.M), int(in.K), int(in.N)
	if err := npu.PackA(in, a, M, K, bd.a.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := npu.PackB(in, b, K, N, bd.b.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := bd.ctx.Run(); err != nil {
		t.Fatal(err)
	}
	c := make([]float32, M*N)
	if err := npu.UnpackC(in, bd.c.Bytes(), c, M, N); err != nil {
		t.Fatal(err)
	}
	return c
}

func sameBits(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }

func TestFloatMatchesReferenceInEveryLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	d := New(Options{})
	shapes := [][3]int32{{1, 32, 16}, {3, 96, 48}, {5, 160, 32}, {2, 10240, 16}}
	for _, typ := range []npu.MatmulType{npu.Float16MMFloat16ToFloat32, npu.Float16MMFloat16ToFloat16} {
		for _, s := range shapes {
			M, K, N := int(s[0]), int(s[1]), int(s[2])
			a := make([]float32, M*K)
			b := make([]float32, K*N)
			for i := range a {
				a[i] = randHalf(rng)
			}
			for i := range b {
				b[i] = randHalf(rng)
			}
			want := refBlock32(a, b, M, K, N)
			if typ == npu.Float16MMFloat16ToFloat16 {
				for i, v := range want {
					want[i] = float16.Fromfloat32(v).Float32()
				}
			}
			for _, bl := range []npu.Layout{npu.LayoutNorm, npu.LayoutNative, npu.LayoutTPNorm} {
				for _, acl := range []npu.Layout{npu.LayoutNorm, npu.LayoutNative} {
					in := mkInfo(typ, s[0], s[1], s[2], bl, acl)
					got := runFloat(t, d, in, a, b)
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("%s %v B=%s AC=%s: C[%d] = %v, want %v", typ, s, bl, acl, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// Products 2^24, 1 (block 0) and 1, -2^24 (block 1). Block-32 float32 gives
// (2^24+1 → 2^24) + (1-2^24) = 1; a naive float32 loop gives 0; float64 gives 2.
func TestAccumulationOrderIsBlock32(t *testing.T) {
	const K = 64
	a := make([]float32, K)
	b := make([]float32, K*16)
	a[0], a[1], a[32], a[33] = 4096, 1, 1, -4096
	for n := 0; n < 16; n++ {
		b[0*16+n], b[1*16+n], b[32*16+n], b[33*16+n] = 4096, 1, 1, 4096
	}
	var naive float32
	var exact float64
	for k := 0; k < K; k++ {
		naive += a[k] * b[k*16]
		exact += float64(a[k]) * float64(b[k*16])
	}
	if naive != 0 || exact != 2 {
		t.Fatalf("test premise: naive %v, float64 %v", naive, exact)
	}
	for _, typ := range []npu.MatmulType{npu.Float16MMFloat16ToFloat32, npu.Float16MMFloat16ToFloat16} {
		c := runFloat(t, New(Options{}), mkInfo(typ, 1, K, 16, npu.LayoutNative, npu.LayoutNative), a, b)
		for n, v := range c {
			if v != 1 {
				t.Errorf("%s: C[0,%d] = %v, want 1 (block-32 order)", typ, n, v)
			}
		}
	}
}

// fp16 output rounding at ties and overflow, through real runs with B = 1.
func TestHalfRoundingThroughRun(t *testing.T) {
	rows := []struct {
		a0, a1 float32
		want   float32
	}{
		{2048, 1, 2048},                      // 2049 tie -> even 2048
		{2048, 3, 2052},                      // 2051 tie -> even 2052
		{1, 1.0 / 2048, 1},                   // 1+2^-11 tie -> 1
		{1, 3.0 / 2048, 1 + 2.0/1024},        // 1+3·2^-11 tie -> 1+2^-9
		{65504, 15, 65504},                   // 65519 -> max finite
		{65504, 16, float32(math.Inf(1))},    // 65520 -> +Inf
		{-65504, -16, float32(math.Inf(-1))}, // -65520 -> -Inf
		{-2048, -1, -2048},                   // symmetric tie
		{4096, 2, 4096},                      // 4098 tie (spacing 4) -> 4096
		{4096, 6, 4104},                      // 4102 tie -> 4104
	}
	M, K, N := len(rows), 32, 16
	a := make([]float32, M*K)
	for i, r := range rows {
		a[i*K], a[i*K+1] = r.a0, r.a1
	}
	b := make([]float32, K*N)
	for i := range b {
		b[i] = 1
	}
	c := runFloat(t, New(Options{}), mkInfo(npu.Float16MMFloat16ToFloat16, int32(M), int32(K), int32(N), npu.LayoutNorm, npu.LayoutNative), a, b)
	for i, r := range rows {
		for n := 0; n < N; n++ {
			if got := c[i*N+n]; got != r.want {
				t.Errorf("row %d (%v+%v): C = %v, want %v", i, r.a0, r.a1, got, r.want)
			}
		}
	}
	// With fp32 output the sums are exact; the input rounding happens when A
	// is packed: 2049 -> 2048, 65520 -> +Inf.
	a2 := make([]float32, 2*K)
	a2[0], a2[K] = 2049, 65520
	c2 := runFloat(t, New(Options{}), mkInfo(npu.Float16MMFloat16ToFloat32, 2, int32(K), int32(N), npu.LayoutNative, npu.LayoutNorm), a2, b)
	if c2[0] != 2048 || !math.IsInf(float64(c2[N]), 1) {
		t.Errorf("fp32 out: %v, %v; want 2048, +Inf", c2[0], c2[N])
	}
	a3 := make([]float32, K)
	a3[0], a3[1] = 2048, 1
	c3 := runFloat(t, New(Options{}), mkInfo(npu.Float16MMFloat16ToFloat32, 1, int32(K), int32(N), npu.LayoutNorm, npu.LayoutNorm), a3, b)
	if c3[0] != 2049 {
		t.Errorf("fp32 out keeps 2049 exactly, got %v", c3[0])
	}
}

func runInt(t testing.TB, d npu.Driver, in *npu.MatmulInfo, a, b []int8, q ...npu.QuantParams) []int32 {
	t.Helper()
	bd := setup(t, d, in)
	M, K, N := int(in.M), int(in.K), int(in.N)
	for i := range q {
		if err := bd.ctx.SetQuantParams(&q[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := npu.PackA(in, a, M, K, bd.a.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := npu.PackB(in, b, K, N, bd.b.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := bd.ctx.Run(); err != nil {
		t.Fatal(err)
	}
	c := make([]int32, M*N)
	if err := npu.UnpackC(in, bd.c.Bytes(), c, M, N); err != nil {
		t.Fatal(err)
	}
	return c
}

func refInt64(a, b []int8, M, K, N int, zpA, zpB int64) []int64 {
	c := make([]int64, M*N)
	for m := 0; m < M; m++ {
		for n := 0; n < N; n++ {
			var s int64
			for k := 0; k < K; k++ {
				s += (int64(a[m*K+k]) - zpA) * (int64(b[k*N+n]) - zpB)
			}
			c[m*N+n] = s
		}
	}
	return c
}

func randInts(rng *rand.Rand, n int, lo, hi int) []int8 {
	v := make([]int8, n)
	for i := range v {
		v[i] = int8(lo + rng.IntN(hi-lo+1))
	}
	return v
}

func TestInt8ExactInEveryLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	d := New(Options{})
	for _, s := range [][3]int{{1, 32, 32}, {4, 224, 64}, {3, 10240, 32}} {
		M, K, N := s[0], s[1], s[2]
		a, b := randInts(rng, M*K, -128, 127), randInts(rng, K*N, -128, 127)
		for k := 0; k < K; k++ { // row 0 × column 0 hits the extreme sum 128·128·K
			a[k], b[k*N] = -128, -128
		}
		want := refInt64(a, b, M, K, N, 0, 0)
		for _, bl := range []npu.Layout{npu.LayoutNorm, npu.LayoutNative, npu.LayoutTPNorm} {
			for _, acl := range []npu.Layout{npu.LayoutNorm, npu.LayoutNative} {
				in := mkInfo(npu.Int8MMInt8ToInt32, int32(M), int32(K), int32(N), bl, acl)
				got := runInt(t, d, in, a, b)
				for i := range want {
					if int64(got[i]) != want[i] {
						t.Fatalf("%v B=%s AC=%s: C[%d] = %d, want %d", s, bl, acl, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestInt4ExactAndSaturating(t *testing.T) {
	const K, N = 640, 64
	// Row 0: 511·(-8·-8) + 7·7 + 7·2 = 32767 (fits). Row 1: 512·64 = 32768 -> 32767.
	// Row 2: 640·(-8·7) = -35840 -> -32768. Row 3: random, exact.
	a := make([]int8, 4*K)
	b := make([]int8, K*N)
	for k := 0; k < 511; k++ {
		a[k] = -8
	}
	a[511], a[512] = 7, 7
	for k := 0; k < 512; k++ {
		a[K+k] = -8
	}
	for k := 0; k < K; k++ {
		a[2*K+k] = -8
	}
	rng := rand.New(rand.NewPCG(11, 12))
	copy(a[3*K:], randInts(rng, K, -8, 7))
	for k := 0; k < K; k++ {
		for n := 0; n < N; n++ {
			b[k*N+n] = int8(-8 + rng.IntN(16))
		}
	}
	for n := 0; n < 4; n++ { // columns 0..3 drive the saturation rows
		for k := 0; k < K; k++ {
			b[k*N+n] = -8
			if k >= 511 {
				b[k*N+n] = 7
				if k == 512 {
					b[k*N+n] = 2
				}
			}
		}
	}
	for k := 0; k < K; k++ { // row 1 needs b = -8 at k = 511
		b[k*N+4] = -8
		b[k*N+5] = 7
	}
	ref := refInt64(a, b, 4, K, N, 0, 0)
	if ref[0*N+0] != 32767 || ref[1*N+4] != 32768 || ref[2*N+5] != -35840 {
		t.Fatalf("test premise: %d %d %d", ref[0], ref[N+4], ref[2*N+5])
	}
	for _, bl := range []npu.Layout{npu.LayoutNorm, npu.LayoutNative, npu.LayoutTPNorm} {
		for _, acl := range []npu.Layout{npu.LayoutNorm, npu.LayoutNative} {
			got := runInt(t, New(Options{}), mkInfo(npu.Int4MMInt4ToInt16, 4, K, N, bl, acl), a, b)
			for i, r := range ref {
				want := min(max(r, math.MinInt16), math.MaxInt16)
				if int64(got[i]) != want {
					t.Fatalf("B=%s AC=%s: C[%d,%d] = %d, want %d (exact %d)", bl, acl, i/N, i%N, got[i], want, r)
				}
			}
		}
	}
}

func TestInt8ToInt8Requantizes(t *testing.T) {
	// The demo's configuration: sA=0.2, sB=0.1, sC=0.8, zero points 0.
	const K, N = 64, 32
	a := make([]int8, 3*K)
	b := make([]int8, K*N)
	for k := 0; k < K; k++ {
		a[k], a[K+k], a[2*K+k] = 1, 127, -128
		for n := 0; n < N; n++ {
			b[k*N+n] = 1
		}
	}
	q := []npu.QuantParams{{Name: "A", Scale: []float32{0.2}}, {Name: "B", Scale: []float32{0.1}}, {Name: "C", Scale: []float32{0.8}}}
	got := runInt(t, New(Options{}), mkInfo(npu.Int8MMInt8ToInt8, 3, K, N, npu.LayoutNative, npu.LayoutNative), a, b, q...)
	// 64·0.025 = 1.6 -> 2; 127·64·0.025 = 203.2 -> 127; -128·64·0.025 = -204.8 -> -128.
	for n := 0; n < N; n++ {
		if got[n] != 2 || got[N+n] != 127 || got[2*N+n] != -128 {
			t.Fatalf("column %d: %d %d %d, want 2 127 -128", n, got[n], got[N+n], got[2*N+n])
		}
	}
	// Asymmetric, random: compare with the formula on an int64 reference.
	rng := rand.New(rand.NewPCG(13, 14))
	M := 4
	a, b = randInts(rng, M*K, -128, 127), randInts(rng, K*N, -128, 127)
	in := &npu.MatmulInfo{M: int32(M), K: K, N: N, Type: npu.Int8MMInt8ToInt8, ACQuantType: npu.QuantPerLayerAsym, BQuantType: npu.QuantPerLayerAsym}
	sA, sB, sC := float32(0.013), float32(0.021), float32(0.9)
	q = []npu.QuantParams{{Name: "A", Scale: []float32{sA}, ZP: []int32{5}}, {Name: "B", Scale: []float32{sB}, ZP: []int32{-3}}, {Name: "C", Scale: []float32{sC}, ZP: []int32{7}}}
	got = runInt(t, New(Options{}), in, a, b, q...)
	ref := refInt64(a, b, M, K, N, 5, -3)
	for i, s := range ref {
		v := math.Round(float64(s)*(float64(sA)*float64(sB)/float64(sC))) + 7
		want := int32(min(max(v, -128), 127))
		if got[i] != want {
			t.Fatalf("C[%d] = %d, want %d (sum %d)", i, got[i], want, s)
		}
	}
}

func TestResultsIndependentOfThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const M, K, N = 16, 256, 144
	a := make([]float32, M*K)
	b := make([]float32, K*N)
	for i := range a {
		a[i] = randHalf(rng)
	}
	for i := range b {
		b[i] = randHalf(rng)
	}
	c1 := runFloat(t, New(Options{Threads: 1}), mkInfo(npu.Float16MMFloat16ToFloat32, M, K, N, npu.LayoutNorm, npu.LayoutNorm), a, b)
	for _, bl := range []npu.Layout{npu.LayoutNorm, npu.LayoutNative, npu.LayoutTPNorm} {
		in := mkInfo(npu.Float16MMFloat16ToFloat32, M, K, N, bl, npu.LayoutNative)
		for _, th := range []int{2, 3, 7} {
			c := runFloat(t, New(Options{Threads: th}), in, a, b)
			for i := range c1 {
				if !sameBits(c[i], c1[i]) {
					t.Fatalf("B=%s threads=%d: C[%d] = %v, threads=1 gave %v", bl, th, i, c[i], c1[i])
				}
			}
		}
		// A host pool (Options.Parallel) that hands out the smallest
		// aligned ranges, last first, computes the same bits.
		calls := 0
		backwards := func(n, align int, fn func(lo, hi int)) {
			for hi := n; hi > 0; {
				lo := (hi - 1) / align * align
				fn(lo, hi)
				hi = lo
				calls++
			}
		}
		c := runFloat(t, New(Options{Threads: 2, Parallel: backwards}), in, a, b)
		if calls == 0 {
			t.Fatalf("B=%s: Options.Parallel never called", bl)
		}
		for i := range c1 {
			if !sameBits(c[i], c1[i]) {
				t.Fatalf("B=%s Parallel backwards: C[%d] = %v, threads=1 gave %v", bl, i, c[i], c1[i])
			}
		}
	}
}

func TestRunOverwritesWholeC(t *testing.T) {
	d := New(Options{})
	in := mkInfo(npu.Int8MMInt8ToInt32, 3, 32, 32, npu.LayoutNorm, npu.LayoutNative)
	bd := setup(t, d, in)
	for i := range bd.c.Bytes() {
		bd.c.Bytes()[i] = 0xff
	}
	if err := bd.ctx.Run(); err != nil { // A, B all zero
		t.Fatal(err)
	}
	for i, v := range bd.c.Bytes() {
		if v != 0 {
			t.Fatalf("C byte %d = %#x after a zero product", i, v)
		}
	}
}

func TestStats(t *testing.T) {
	d := New(Options{})
	b1 := setup(t, d, mkInfo(npu.Float16MMFloat16ToFloat32, 2, 64, 32, npu.LayoutNative, npu.LayoutNorm))
	b2 := setup(t, d, mkInfo(npu.Int4MMInt4ToInt16, 3, 64, 64, npu.LayoutNative, npu.LayoutNative))
	for _, r := range []func() error{b1.ctx.Run, b1.ctx.Run, b2.ctx.Run} {
		if err := r(); err != nil {
			t.Fatal(err)
		}
	}
	s := d.Stats()
	want := npu.Stats{
		Runs:     3,
		BytesIn:  2*(2*64*2+64*32*2) + (3*64/2 + 64*64/2),
		BytesOut: 2*(2*32*4) + 3*64*2,
		MACs:     2*(2*64*32) + 3*64*64,
	}
	if s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
}

// TestNativeBShapes: native B (the layout the offload uses, computed by the
// fast kernels where available) for row counts on both sides of the
// decode-sized path, odd and even channel groups, K of 1, 2, 3, 5 and 14
// blocks (the decode kernel stages blocks in pairs, the next pair while it
// sums the last: one pair, several, an odd block at the end), 256 blocks
// (K 8192, the decode kernel's limit) and K split into 8192 segments,
// against the per-element references.
func TestNativeBShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	d := New(Options{Threads: 2})
	ms := []int{1, 2, 3, 4, 5, 9}
	if testing.Short() {
		ms = []int{1, 2, 4, 5} // under qemu: every row block and a remainder, half the work
	}
	for _, M := range ms {
		for _, K := range []int{32, 64, 96, 160, 448, 8192, 8224} {
			for _, N := range []int{16, 48, 64} {
				a, b := make([]float32, M*K), make([]float32, K*N)
				for i := range a {
					a[i] = randHalf(rng)
				}
				for i := range b {
					b[i] = randHalf(rng)
				}
				want := refBlock32(a, b, M, K, N)
				got := runFloat(t, d, mkInfo(npu.Float16MMFloat16ToFloat32, int32(M), int32(K), int32(N), npu.LayoutNative, npu.LayoutNative), a, b)
				for i := range want {
					if !sameBits(got[i], want[i]) {
						t.Fatalf("fp16 M=%d K=%d N=%d: C[%d] = %v, want %v", M, K, N, i, got[i], want[i])
					}
				}
				for _, typ := range []npu.MatmulType{npu.Int8MMInt8ToInt32, npu.Int4MMInt4ToInt16} {
					lo, hi, n := -128, 127, 2*N
					if typ == npu.Int4MMInt4ToInt16 {
						lo, hi, n = -8, 7, 4*N
					}
					ai, bi := randInts(rng, M*K, lo, hi), randInts(rng, K*n, lo, hi)
					ref := refInt64(ai, bi, M, K, n, 0, 0)
					got := runInt(t, d, mkInfo(typ, int32(M), int32(K), int32(n), npu.LayoutNative, npu.LayoutNorm), ai, bi)
					for i, r := range ref {
						if typ == npu.Int4MMInt4ToInt16 {
							r = min(max(r, math.MinInt16), math.MaxInt16)
						}
						if int64(got[i]) != r {
							t.Fatalf("%s M=%d K=%d N=%d: C[%d] = %d, want %d", typ, M, K, n, i, got[i], r)
						}
					}
				}
			}
		}
	}
}
