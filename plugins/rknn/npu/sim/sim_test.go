package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

func mkInfo(t npu.MatmulType, M, K, N int32, b, ac npu.Layout) *npu.MatmulInfo {
	return &npu.MatmulInfo{M: M, K: K, N: N, Type: t, BLayout: b, ACLayout: ac}
}

// bound is a context with A, B and C memories attached.
type bound struct {
	ctx     npu.Context
	attrs   npu.IOAttr
	a, b, c npu.Mem
}

func setup(t testing.TB, d npu.Driver, in *npu.MatmulInfo) *bound {
	t.Helper()
	ctx, attrs, err := d.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	bd := &bound{ctx: ctx, attrs: attrs}
	for _, p := range []struct {
		attr *npu.TensorAttr
		mem  *npu.Mem
	}{{&attrs.A, &bd.a}, {&attrs.B, &bd.b}, {&attrs.C, &bd.c}} {
		m, err := ctx.CreateMem(int(p.attr.Size))
		if err != nil {
			t.Fatal(err)
		}
		if err := ctx.SetIOMem(m, p.attr); err != nil {
			t.Fatal(err)
		}
		*p.mem = m
	}
	return bd
}

func wantCode(t *testing.T, what string, err error, code int, msgParts ...string) {
	t.Helper()
	if got := npu.Code(err); got != code {
		t.Errorf("%s: error %v, want code %d (%s)", what, err, code, npu.ErrorName(code))
		return
	}
	for _, p := range msgParts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not mention %q", what, err, p)
		}
	}
}

func TestCreateRejectsLikeRK3588(t *testing.T) {
	d := New(Options{})
	cases := []struct {
		what string
		in   *npu.MatmulInfo
		msg  []string
	}{
		{"nil info", nil, []string{"nil"}},
		{"type 5", mkInfo(5, 1, 32, 16, 0, 0), []string{"type 5", "FLOAT16_MM_INT8_TO_FLOAT32", "not supported"}},
		{"type 7", mkInfo(7, 1, 32, 16, 0, 0), []string{"type 7"}},
		{"type 9", mkInfo(9, 1, 32, 32, 0, 0), []string{"type 9"}},
		{"type 11", mkInfo(11, 1, 32, 64, 0, 0), []string{"type 11"}},
		{"type 0", mkInfo(0, 1, 32, 16, 0, 0), []string{"type 0"}},
		{"M=0", mkInfo(1, 0, 32, 16, 0, 0), []string{"M=0"}},
		{"K<0", mkInfo(1, 1, -32, 16, 0, 0), []string{"K=-32"}},
		{"N=0", mkInfo(1, 1, 32, 0, 0, 0), []string{"N=0"}},
		{"K%32", mkInfo(1, 1, 48, 16, 0, 0), []string{"K=48", "multiple of 32"}},
		{"K>10240", mkInfo(1, 1, 10272, 16, 0, 0), []string{"K=10272", "10240"}},
		{"K=12288", mkInfo(1, 1, 12288, 16, 1, 0), []string{"K=12288", "10240"}},
		{"fp16 N%16", mkInfo(1, 1, 32, 24, 0, 0), []string{"N=24", "multiple of 16"}},
		{"fp16 out N%16", mkInfo(4, 1, 32, 8, 0, 0), []string{"N=8", "multiple of 16"}},
		{"int8 N%32", mkInfo(2, 1, 32, 48, 0, 0), []string{"N=48", "multiple of 32"}},
		{"int8->int8 N%32", mkInfo(3, 1, 32, 16, 0, 0), []string{"N=16", "multiple of 32"}},
		{"int4 N%64", mkInfo(10, 1, 32, 96, 0, 0), []string{"N=96", "multiple of 64"}},
		{"B_layout 3", mkInfo(1, 1, 32, 16, 3, 0), []string{"B_layout=3"}},
		{"B_layout -1", mkInfo(1, 1, 32, 16, -1, 0), []string{"B_layout=-1"}},
		{"AC_layout 2", mkInfo(1, 1, 32, 16, 0, 2), []string{"AC_layout=2"}},
		{"B per-channel", &npu.MatmulInfo{M: 1, K: 32, N: 32, Type: 2, BQuantType: npu.QuantPerChannelSym}, []string{"B_quant_type=2"}},
		{"AC per-group", &npu.MatmulInfo{M: 1, K: 32, N: 32, Type: 3, ACQuantType: npu.QuantPerGroupSym}, []string{"AC_quant_type=4"}},
	}
	for _, c := range cases {
		ctx, _, err := d.Create(c.in)
		if ctx != nil {
			t.Errorf("%s: got a context", c.what)
		}
		wantCode(t, c.what, err, npu.ErrParamInvalid, append(c.msg, "rknn_matmul_create")...)
	}
	for _, ok := range []*npu.MatmulInfo{
		mkInfo(1, 1, 32, 16, 0, 0), mkInfo(4, 7, 10240, 16, 1, 1), mkInfo(2, 3, 64, 32, 2, 1),
		mkInfo(3, 1, 32, 32, 1, 0), mkInfo(10, 2, 64, 64, 1, 1), mkInfo(1, 1000, 32, 4096, 0, 0),
	} {
		if _, _, err := d.Create(ok); err != nil {
			t.Errorf("Create(%+v): %v", *ok, err)
		}
	}
}

func TestCreateFillsAttrs(t *testing.T) {
	d := New(Options{})
	_, io, err := d.Create(mkInfo(1, 3, 10240, 32, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	check := func(a npu.TensorAttr, name string, dims []uint32, size uint32, typ npu.TensorType) {
		t.Helper()
		if a.Name != name || !slices.Equal(a.Dims, dims) || a.Size != size || a.Type != typ {
			t.Errorf("attr %+v, want %s %v %d %s", a, name, dims, size, typ)
		}
	}
	check(io.A, "A", []uint32{1280, 3, 8}, 1280*3*8*2, npu.TensorFloat16)
	check(io.B, "B", []uint32{2, 320, 16, 32}, 2*320*16*32*2, npu.TensorFloat16)
	check(io.C, "C", []uint32{8, 3, 4}, 8*3*4*4, npu.TensorFloat32)
	_, io, _ = d.Create(mkInfo(3, 2, 64, 32, 2, 1))
	check(io.A, "A", []uint32{4, 2, 16}, 4*2*16, npu.TensorInt8)
	check(io.B, "B", []uint32{32, 64}, 32*64, npu.TensorInt8)
	check(io.C, "C", []uint32{2, 2, 16}, 2*2*16, npu.TensorInt8)
}

func TestMemoryRules(t *testing.T) {
	d := New(Options{})
	in := mkInfo(1, 2, 32, 16, 0, 0)
	ctx, io, err := d.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ctx.CreateMem(0)
	wantCode(t, "CreateMem(0)", err, npu.ErrParamInvalid, "rknn_create_mem")
	small, _ := ctx.CreateMem(int(io.A.Size) - 1)
	wantCode(t, "small A", ctx.SetIOMem(small, &io.A), npu.ErrParamInvalid, "A", "mem size 127 < attr size 128")
	a, _ := ctx.CreateMem(int(io.A.Size))
	bad := io.A
	bad.Name = "D"
	wantCode(t, "name D", ctx.SetIOMem(a, &bad), npu.ErrParamInvalid, `"D"`)
	wantCode(t, "nil attr", ctx.SetIOMem(a, nil), npu.ErrParamInvalid)
	wantCode(t, "foreign mem", ctx.SetIOMem(fakeMem{}, &io.A), npu.ErrParamInvalid, "not created by this driver")
	if err := ctx.SetIOMem(a, &io.A); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "run without B", ctx.Run(), npu.ErrParamInvalid, "B memory not set")
	b, _ := ctx.CreateMem(int(io.B.Size))
	if err := ctx.SetIOMem(b, &io.B); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "run without C", ctx.Run(), npu.ErrParamInvalid, "C memory not set")
	c, _ := ctx.CreateMem(int(io.C.Size) + 100) // bigger is fine
	if err := ctx.SetIOMem(c, &io.C); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Run(); err != nil {
		t.Fatal(err)
	}
	if err := ctx.DestroyMem(b); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "double DestroyMem", ctx.DestroyMem(b), npu.ErrParamInvalid, "already destroyed")
	wantCode(t, "run with freed B", ctx.Run(), npu.ErrParamInvalid, "B memory was destroyed")
	wantCode(t, "bind freed", ctx.SetIOMem(b, &io.B), npu.ErrParamInvalid, "destroyed")
	if got := d.Stats().Runs; got != 1 {
		t.Errorf("runs = %d, want 1 (failed runs do not count)", got)
	}
}

type fakeMem struct{}

func (fakeMem) Bytes() []byte { return make([]byte, 1<<20) }
func (fakeMem) Size() int     { return 1 << 20 }

func TestCoreMask(t *testing.T) {
	d := New(Options{})
	ctx, _, err := d.Create(mkInfo(1, 1, 32, 16, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	sc := ctx.(*Context)
	for _, m := range []npu.CoreMask{0, 1, 2, 4, 3, 7, 0xffff} {
		if err := ctx.SetCoreMask(m); err != nil {
			t.Errorf("mask %#x: %v", m, err)
		}
		if sc.CoreMask() != m {
			t.Errorf("mask %#x not recorded (%#x)", m, sc.CoreMask())
		}
	}
	for _, m := range []npu.CoreMask{5, 6, 8, 0xfffe, 0x10000} {
		wantCode(t, "mask", ctx.SetCoreMask(m), npu.ErrParamInvalid, "core mask")
	}
	if sc.CoreMask() != 0xffff {
		t.Error("a rejected mask changed the recorded one")
	}
}

func TestDestroyInvalidatesEverything(t *testing.T) {
	d := New(Options{})
	bd := setup(t, d, mkInfo(3, 1, 32, 32, 0, 0))
	if err := bd.ctx.Destroy(); err != nil {
		t.Fatal(err)
	}
	ctx := bd.ctx
	_, err := ctx.CreateMem(16)
	wantCode(t, "CreateMem", err, npu.ErrCtxInvalid)
	wantCode(t, "DestroyMem", ctx.DestroyMem(bd.a), npu.ErrCtxInvalid)
	wantCode(t, "SetIOMem", ctx.SetIOMem(bd.a, &bd.attrs.A), npu.ErrCtxInvalid)
	wantCode(t, "SetCoreMask", ctx.SetCoreMask(1), npu.ErrCtxInvalid)
	wantCode(t, "SetQuantParams", ctx.SetQuantParams(&npu.QuantParams{Name: "A", Scale: []float32{1}}), npu.ErrCtxInvalid)
	wantCode(t, "Run", ctx.Run(), npu.ErrCtxInvalid, "destroyed")
	wantCode(t, "Destroy", ctx.Destroy(), npu.ErrCtxInvalid)
}

func TestQuantParamRules(t *testing.T) {
	d := New(Options{})
	bd := setup(t, d, &npu.MatmulInfo{M: 1, K: 32, N: 32, Type: 3, ACQuantType: npu.QuantPerLayerAsym})
	ok := []npu.QuantParams{
		{Name: "A", Scale: []float32{0.2}, ZP: []int32{3}},
		{Name: "B", Scale: []float32{0.1}},
		{Name: "C", Scale: []float32{0.8}, ZP: []int32{-5}},
	}
	for _, p := range ok {
		if err := bd.ctx.SetQuantParams(&p); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	bad := []struct {
		p   npu.QuantParams
		msg string
	}{
		{npu.QuantParams{Name: "X", Scale: []float32{1}}, `"X"`},
		{npu.QuantParams{Name: "A", Scale: []float32{1, 2}}, "scale_len=1"},
		{npu.QuantParams{Name: "A", Scale: []float32{0}}, "scale 0"},
		{npu.QuantParams{Name: "B", Scale: []float32{1}, ZP: []int32{2}}, "symmetric"},
		{npu.QuantParams{Name: "C", Scale: []float32{1}, ZP: []int32{300}}, "outside int8"},
	}
	for _, b := range bad {
		wantCode(t, b.msg, bd.ctx.SetQuantParams(&b.p), npu.ErrParamInvalid, b.msg)
	}
	other := setup(t, d, mkInfo(2, 1, 32, 32, 0, 0))
	wantCode(t, "type 2", other.ctx.SetQuantParams(&ok[1]), npu.ErrParamInvalid, "INT8_MM_INT8_TO_INT8 only")
}
