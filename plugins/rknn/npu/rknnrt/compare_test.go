//go:build rknpu && cgo

package rknnrt

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
)

// With the fake library (EVALRUN_RKNNRT_FAKE=1, set by run-fake-test.sh and
// TestCgoDriverAgainstFakeLibrary) the cgo driver must match the simulator bit
// for bit. On a board only the integer paths are exact; float results are
// compared with a tolerance and rule differences are logged.
var fake = os.Getenv("EVALRUN_RKNNRT_FAKE") == "1"

type pair struct {
	hw, sw npu.Driver
}

func newPair(t *testing.T) pair {
	t.Helper()
	hw, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return pair{hw: hw, sw: sim.New(sim.Options{})}
}

type side struct {
	ctx     npu.Context
	attrs   npu.IOAttr
	a, b, c npu.Mem
}

func open(t *testing.T, d npu.Driver, in *npu.MatmulInfo) *side {
	t.Helper()
	ctx, attrs, err := d.Create(in)
	if err != nil {
		t.Fatalf("%s: %v", d.Name(), err)
	}
	s := &side{ctx: ctx, attrs: attrs}
	for _, p := range []struct {
		attr *npu.TensorAttr
		mem  *npu.Mem
	}{{&attrs.A, &s.a}, {&attrs.B, &s.b}, {&attrs.C, &s.c}} {
		m, err := ctx.CreateMem(int(p.attr.Size))
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		if err := ctx.SetIOMem(m, p.attr); err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		*p.mem = m
	}
	return s
}

func sameAttr(x, y npu.TensorAttr) bool {
	return x.Name == y.Name && slices.Equal(x.Dims, y.Dims) && x.Size == y.Size && x.Type == y.Type
}

// fill writes random valid elements: finite fp16 (subnormals included) or
// random int8/int4 bytes.
func fill(rng *rand.Rand, buf []byte, fp16 bool) {
	if !fp16 {
		for i := range buf {
			buf[i] = byte(rng.IntN(256))
		}
		return
	}
	for i := 0; i+1 < len(buf); i += 2 {
		h := uint16(rng.IntN(2))<<15 | uint16(rng.IntN(31))<<10 | uint16(rng.IntN(1024))
		binary.LittleEndian.PutUint16(buf[i:], h)
	}
}

func TestMatchesSimulator(t *testing.T) {
	p := newPair(t)
	rng := rand.New(rand.NewPCG(21, 22))
	types := []npu.MatmulType{1, 2, 3, 4, 10}
	align := map[npu.MatmulType]int{1: 16, 4: 16, 2: 32, 3: 32, 10: 64}
	runs := 0
	for iter := 0; iter < 120; iter++ {
		typ := types[iter%len(types)]
		in := &npu.MatmulInfo{
			M: int32(1 + rng.IntN(9)), K: int32(32 * (1 + rng.IntN(8))), N: int32(align[typ] * (1 + rng.IntN(3))),
			Type: typ, BLayout: npu.Layout(rng.IntN(3)), ACLayout: npu.Layout(rng.IntN(2)),
		}
		if iter%20 == 7 { // K > 8192: segmented native B
			in.K, in.M, in.BLayout = int32(8192+32*(1+rng.IntN(64))), 2, npu.LayoutNative
		}
		if typ == npu.Int8MMInt8ToInt8 && rng.IntN(2) == 0 {
			in.ACQuantType, in.BQuantType = npu.QuantPerLayerAsym, npu.QuantPerLayerAsym
		}
		hw, sw := open(t, p.hw, in), open(t, p.sw, in)
		for _, pr := range [][2]npu.TensorAttr{{hw.attrs.A, sw.attrs.A}, {hw.attrs.B, sw.attrs.B}, {hw.attrs.C, sw.attrs.C}} {
			if !sameAttr(pr[0], pr[1]) {
				t.Errorf("%+v: rknnrt attr %+v, sim %+v", *in, pr[0], pr[1])
			}
		}
		fp16 := typ == 1 || typ == 4
		fill(rng, hw.a.Bytes(), fp16)
		fill(rng, hw.b.Bytes(), fp16)
		copy(sw.a.Bytes(), hw.a.Bytes())
		copy(sw.b.Bytes(), hw.b.Bytes())
		if typ == npu.Int8MMInt8ToInt8 {
			asym := in.ACQuantType == npu.QuantPerLayerAsym
			for _, name := range []string{"A", "B", "C"} {
				q := npu.QuantParams{Name: name, Scale: []float32{float32(0.001 + rng.Float64()/10)}}
				if asym {
					q.ZP = []int32{int32(rng.IntN(21) - 10)}
				}
				for _, s := range []*side{hw, sw} {
					if err := s.ctx.SetQuantParams(&q); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if err := hw.ctx.Run(); err != nil {
			t.Fatal(err)
		}
		if err := sw.ctx.Run(); err != nil {
			t.Fatal(err)
		}
		runs++
		got, want := hw.c.Bytes()[:hw.attrs.C.Size], sw.c.Bytes()[:sw.attrs.C.Size]
		if fake || !fp16 {
			if !bytes.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				t.Fatalf("%+v: C differs from the simulator at byte %d (%#x vs %#x)", *in, i, got[i], want[i])
			}
		} else {
			closeEnough(t, in, hw, sw)
		}
		for _, s := range []*side{hw, sw} {
			if err := s.ctx.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := p.hw.Stats(); st.Runs != int64(runs) || st != p.sw.Stats() {
		t.Errorf("stats rknnrt %+v, sim %+v", st, p.sw.Stats())
	}
}

// closeEnough compares float outputs on real hardware.
func closeEnough(t *testing.T, in *npu.MatmulInfo, hw, sw *side) {
	t.Helper()
	M, N := int(in.M), int(in.N)
	g, w := make([]float32, M*N), make([]float32, M*N)
	if err := npu.UnpackC(in, hw.c.Bytes(), g, M, N); err != nil {
		t.Fatal(err)
	}
	if err := npu.UnpackC(in, sw.c.Bytes(), w, M, N); err != nil {
		t.Fatal(err)
	}
	tol := 1e-5
	if in.Type == npu.Float16MMFloat16ToFloat16 {
		tol = 1e-3
	}
	for i := range g {
		if d := math.Abs(float64(g[i] - w[i])); d > tol*math.Max(1, math.Abs(float64(w[i]))) {
			t.Errorf("%+v: C[%d] = %v on the NPU, %v in the simulator", *in, i, g[i], w[i])
			return
		}
	}
}

func TestSameRules(t *testing.T) {
	p := newPair(t)
	report := t.Errorf
	if !fake {
		report = t.Logf // a board may differ; record it
	}
	for _, in := range []*npu.MatmulInfo{
		{M: 1, K: 32, N: 16, Type: 5}, {M: 1, K: 32, N: 16, Type: 7}, {M: 0, K: 32, N: 16, Type: 1},
		{M: 1, K: 48, N: 16, Type: 1}, {M: 1, K: 10272, N: 16, Type: 1}, {M: 1, K: 12288, N: 16, Type: 1, BLayout: 1},
		{M: 1, K: 32, N: 24, Type: 1}, {M: 1, K: 32, N: 48, Type: 2}, {M: 1, K: 32, N: 96, Type: 10},
		{M: 1, K: 32, N: 16, Type: 1, BLayout: 3}, {M: 1, K: 32, N: 16, Type: 1, ACLayout: 2},
		{M: 1, K: 32, N: 32, Type: 2, BQuantType: 2}, {M: 1, K: 10240, N: 16, Type: 1, BLayout: 1},
	} {
		_, _, e1 := p.hw.Create(in)
		_, _, e2 := p.sw.Create(in)
		if npu.Code(e1) != npu.Code(e2) {
			report("%+v: rknnrt %v, sim %v", *in, e1, e2)
		}
	}
	in := &npu.MatmulInfo{M: 2, K: 32, N: 16, Type: 1}
	for _, d := range []npu.Driver{p.hw, p.sw} {
		ctx, io, err := d.Create(in)
		if err != nil {
			t.Fatal(err)
		}
		codes := []int{}
		small, _ := ctx.CreateMem(int(io.A.Size) - 1)
		codes = append(codes, npu.Code(ctx.SetIOMem(small, &io.A)))
		a, _ := ctx.CreateMem(int(io.A.Size))
		bad := io.A
		bad.Name = "D"
		codes = append(codes, npu.Code(ctx.SetIOMem(a, &bad)), npu.Code(ctx.SetIOMem(a, &io.A)), npu.Code(ctx.Run()))
		for _, m := range []npu.CoreMask{0, 1, 2, 3, 4, 5, 6, 7, 0xffff, 8} {
			codes = append(codes, npu.Code(ctx.SetCoreMask(m)))
		}
		codes = append(codes, npu.Code(ctx.SetQuantParams(&npu.QuantParams{Name: "A", Scale: []float32{1}})))
		codes = append(codes, npu.Code(ctx.Destroy()), npu.Code(ctx.Run()), npu.Code(ctx.Destroy()))
		want := []int{-5, -5, 0, -5, 0, 0, 0, 0, 0, -5, -5, 0, 0, -5, -5, 0, -7, -7}
		if !slices.Equal(codes, want) {
			report("%s: codes %v, want %v", d.Name(), codes, want)
		}
	}
}

func TestMemIsLibraryMemory(t *testing.T) {
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, io, err := d.Create(&npu.MatmulInfo{M: 1, K: 32, N: 16, Type: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ctx.CreateMem(int(io.B.Size))
	if err != nil {
		t.Fatal(err)
	}
	if m.Size() != int(io.B.Size) || len(m.Bytes()) != m.Size() {
		t.Fatalf("mem size %d, bytes %d, want %d", m.Size(), len(m.Bytes()), io.B.Size)
	}
	m.Bytes()[m.Size()-1] = 0x5a // the whole view is writable
	if err := ctx.DestroyMem(m); err != nil {
		t.Fatal(err)
	}
	if m.Bytes() != nil {
		t.Error("destroyed mem still exposes its bytes")
	}
	if npu.Code(ctx.DestroyMem(m)) != npu.ErrParamInvalid {
		t.Error("double DestroyMem accepted")
	}
	if err := ctx.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// Ties, overflow and subnormal results of the fp16 output conversion: the
// fake's C conversion must round exactly like the simulator's.
func TestHalfOutputEdgeCases(t *testing.T) {
	p := newPair(t)
	const K, N = 32, 16
	pairs := [][2]float32{
		{2048, 1}, {2048, 3}, {1, 1.0 / 2048}, {65504, 15}, {65504, 16}, {-65504, -16},
		{4096, 2}, {4096, 6}, {0x1p-24, 0}, {0x3p-24, 0}, {0x5p-24, 0}, {0x1p-14, 0x1p-24},
		{0x3ffp-24, 0x1p-24}, {-0x3p-24, 0}, {0, 0}, {1e-3, -1e-3},
	}
	M := len(pairs)
	a := make([]float32, M*K)
	for i, pr := range pairs {
		a[i*K], a[i*K+1] = pr[0], pr[1]
	}
	b := make([]float32, K*N)
	for k := 0; k < K; k++ {
		for n := 0; n < N; n++ {
			b[k*N+n] = 1
			if n >= 8 {
				b[k*N+n] = 0.5 // halves the sums: ties in the subnormal range
			}
		}
	}
	in := &npu.MatmulInfo{M: int32(M), K: K, N: N, Type: npu.Float16MMFloat16ToFloat16, BLayout: npu.LayoutNative, ACLayout: npu.LayoutNative}
	var outs [2][]byte
	for i, d := range []npu.Driver{p.hw, p.sw} {
		s := open(t, d, in)
		if err := npu.PackA(in, a, M, K, s.a.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := npu.PackB(in, b, K, N, s.b.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := s.ctx.Run(); err != nil {
			t.Fatal(err)
		}
		outs[i] = s.c.Bytes()[:s.attrs.C.Size]
	}
	if fake && !bytes.Equal(outs[0], outs[1]) {
		g, w := make([]uint16, M*N), make([]uint16, M*N)
		_ = npu.UnpackC(in, outs[0], g, M, N)
		_ = npu.UnpackC(in, outs[1], w, M, N)
		t.Errorf("fp16 outputs differ:\nrknnrt %x\nsim    %x", g, w)
	}
}
