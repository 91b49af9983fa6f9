package offload

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
)

// TestSplitN checks the seed's split (llama.cpp RKNN backend, ggml-rknn.cpp):
//
//	int split_B_col = B.col / 32 / 3 * 32;
//	if (i == n_threads - 1) split_B_col = B.col - (n_threads - 1) * split_B_col;
func TestSplitN(t *testing.T) {
	seed := func(N, cores int) []int { // the seed's per-core widths, verbatim
		var w []int
		for i := range cores {
			split := N / 32 / cores * 32
			if i == cores-1 {
				split = N - (cores-1)*split
			}
			w = append(w, split)
		}
		return w
	}
	for _, c := range []struct {
		n, cores int
		want     []Range
	}{
		{172, 3, []Range{{0, 0, 32}, {1, 32, 64}, {2, 64, 172}}},
		{2048, 3, []Range{{0, 0, 672}, {1, 672, 1344}, {2, 1344, 2048}}},
		{8192, 3, []Range{{0, 0, 2720}, {1, 2720, 5440}, {2, 5440, 8192}}},
		{32000, 3, []Range{{0, 0, 10656}, {1, 10656, 21312}, {2, 21312, 32000}}},
		{172, 2, []Range{{0, 0, 64}, {1, 64, 172}}},
		{172, 1, []Range{{0, 0, 172}}},
		{64, 3, []Range{{2, 0, 64}}}, // 64/32/3 = 0: cores 0 and 1 get nothing, the last all
		{96, 3, []Range{{0, 0, 32}, {1, 32, 64}, {2, 64, 96}}},
		{1, 3, []Range{{2, 0, 1}}},
	} {
		got := SplitN(c.n, c.cores)
		if !slices.Equal(got, c.want) {
			t.Errorf("SplitN(%d, %d) = %v, want %v", c.n, c.cores, got, c.want)
		}
	}
	// Every N: the seed's widths (empty cores skipped), contiguous, in core order.
	for n := 1; n <= 2000; n++ {
		for cores := 1; cores <= 3; cores++ {
			rs := SplitN(n, cores)
			var widths []int
			for _, w := range seed(n, cores) {
				if w > 0 {
					widths = append(widths, w)
				}
			}
			if len(rs) != len(widths) || rs[0].Lo != 0 || rs[len(rs)-1].Hi != n || rs[len(rs)-1].Core != cores-1 {
				t.Fatalf("SplitN(%d, %d) = %v, seed widths %v", n, cores, rs, widths)
			}
			for i, r := range rs {
				if r.Hi-r.Lo != widths[i] || (i > 0 && (r.Lo != rs[i-1].Hi || r.Core <= rs[i-1].Core)) {
					t.Fatalf("SplitN(%d, %d) = %v: range %d, seed widths %v", n, cores, rs, i, widths)
				}
			}
		}
	}
}

// randWeight is an F32 weight of N rows of K values uniform in [-1, 1].
func randWeight(rng *rand.Rand, name string, K, N int) *engine.Weight {
	data := make([]byte, 4*K*N)
	for i := range K * N {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(rng.Float32()*2-1))
	}
	return &engine.Weight{Name: name, Type: ggml.F32, K: K, N: N, Data: data}
}

func randVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	return x
}

// nmse is test-backend-ops' error: Σ(a−b)²/Σa², a the tested values.
func nmse(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(a[i]) * float64(a[i])
	}
	return num / den
}

func newOffload(t *testing.T, cfg Config) *MatMuler {
	t.Helper()
	if cfg.Driver == nil {
		cfg.Driver = sim.New(sim.Options{})
	}
	if cfg.Cores == 0 {
		cfg.Cores = 3
	}
	o, err := New(cfg, engine.NewCPUMatMul(engine.Exact, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// run computes op through mm.
func run(t *testing.T, mm engine.MatMuler, op *engine.MatMulOp, x []float32) []float32 {
	t.Helper()
	out := make([]float32, op.T*op.N)
	if err := mm.MatMul(op, x, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAgainstCPU: each type against the CPU exact matmul on random data, at
// K = 172 (padded to 192) and N = 172 (padded per core slice).
func TestAgainstCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := randWeight(rng, "blk.0.ffn_down.weight", 172, 172)
	op := &engine.MatMulOp{Name: "ffn_out-0", T: 5, K: 172, N: 172, Weight: w}
	x := randVec(rng, op.T*op.K)
	ref := run(t, engine.NewCPUMatMul(engine.Exact, nil, nil), op, x)
	bounds := map[Type][2]float64{FP16: {1e-9, 1e-6}, Int8: {1e-6, 2e-4}, Int4: {1e-3, 5e-2}}
	got := map[Type]float64{}
	for _, typ := range []Type{FP16, Int8, Int4} {
		for _, layout := range []npu.Layout{npu.LayoutNative, npu.LayoutNorm} {
			o := newOffload(t, Config{Type: typ, ACLayout: layout})
			out := run(t, o, op, x)
			e := nmse(out, ref)
			t.Logf("%s %v: NMSE vs CPU exact %.3g", typ, layout, e)
			if b := bounds[typ]; !(e > b[0] && e < b[1]) {
				t.Errorf("%s %v: NMSE %.3g outside (%g, %g)", typ, layout, e, b[0], b[1])
			}
			if s := o.Stats(); s.NPUCalls != 1 || s.CPUCalls != 0 || s.NPURuns != 3 {
				t.Errorf("%s: stats %+v, want 1 NPU call of 3 runs", typ, s)
			}
			got[typ] = e
		}
	}
	if !(got[FP16] < got[Int8] && got[Int8] < got[Int4]) {
		t.Errorf("error should grow fp16 < int8 < int4: %v", got)
	}
}

// TestCoreSplitBitIdentical: 1, 2 or 3 cores, run together by the driver
// (npu.CoreRunner, the simulator) or each on its own goroutine (any other
// driver), give the same bits: each output element is accumulated by one
// context in K order.
func TestCoreSplitBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	w := randWeight(rng, "w", 96, 300)
	op := &engine.MatMulOp{Name: "ffn_up-0", T: 3, K: 96, N: 300, Weight: w}
	x := randVec(rng, op.T*op.K)
	for _, typ := range []Type{FP16, Int8, Int4} {
		var first []float32
		for _, cores := range []int{1, 2, 3} {
			for _, together := range []bool{true, false} {
				var drv npu.Driver = sim.New(sim.Options{})
				if !together {
					drv = struct{ npu.Driver }{drv} // hides RunCores
				}
				out := run(t, newOffload(t, Config{Driver: drv, Type: typ, Cores: cores, ACLayout: npu.LayoutNative}), op, x)
				if first == nil {
					first = out
					continue
				}
				for i := range out {
					if math.Float32bits(out[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%s cores=%d run together %v: out[%d] = %v, 1 core gave %v", typ, cores, together, i, out[i], first[i])
					}
				}
			}
		}
	}
}

// TestPadding: K=172 → 192 and each core's N slice padded to the type's
// alignment: 32 for fp16 (the seed's pad_col; the RK3588 needs only 16) and
// int8, 64 for int4. One core: 172 → 192; three cores split 32, 32, 108.
func TestPadding(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	w := randWeight(rng, "w", 172, 172)
	op := &engine.MatMulOp{Name: "ffn_out-0", T: 1, K: 172, N: 172, Weight: w}
	x := randVec(rng, op.K)
	for _, c := range []struct {
		typ    Type
		cores  int
		wantNs []int32
	}{
		{FP16, 1, []int32{192}}, {Int8, 1, []int32{192}}, {Int4, 1, []int32{192}},
		{FP16, 3, []int32{32, 32, 128}}, {Int8, 3, []int32{32, 32, 128}}, {Int4, 3, []int32{64, 64, 128}},
	} {
		o := newOffload(t, Config{Type: c.typ, Cores: c.cores, ACLayout: npu.LayoutNative})
		run(t, o, op, x)
		bufs, _, ok := o.Buffers(w, 1)
		if !ok || len(bufs) != len(c.wantNs) {
			t.Fatalf("%s cores=%d: %d contexts, want %d", c.typ, c.cores, len(bufs), len(c.wantNs))
		}
		for i, b := range bufs {
			if b.Info.K != 192 || b.Info.N != c.wantNs[i] || b.Info.M != 1 {
				t.Errorf("%s cores=%d core %d: M,K,N = %d,%d,%d, want 1,192,%d", c.typ, c.cores, i, b.Info.M, b.Info.K, b.Info.N, c.wantNs[i])
			}
			wantMask := npu.CoreAuto // one core: no mask set, the runtime chooses
			if c.cores > 1 {
				wantMask = npu.Core0 << i
			}
			if b.Mask != wantMask {
				t.Errorf("%s cores=%d core %d mask %#x, want %#x", c.typ, c.cores, i, b.Mask, wantMask)
			}
			if int(b.Attrs.B.Size) != len(b.B) {
				t.Errorf("B size %d != attr %d", len(b.B), b.Attrs.B.Size)
			}
		}
	}
}

// TestWrongBLayoutIsWrong: B packed in the norm layout while the contexts
// say native must give garbage: the device really reads the layout.
func TestWrongBLayoutIsWrong(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	w := randWeight(rng, "w", 64, 64)
	op := &engine.MatMulOp{Name: "Qcur-0", T: 2, K: 64, N: 64, Weight: w}
	x := randVec(rng, op.T*op.K)
	ref := run(t, engine.NewCPUMatMul(engine.Exact, nil, nil), op, x)
	good := newOffload(t, Config{Type: FP16, Cores: 1, ACLayout: npu.LayoutNative})
	if e := nmse(run(t, good, op, x), ref); e > 1e-6 {
		t.Fatalf("correct layout: NMSE %.3g", e)
	}
	bad := newOffload(t, Config{Type: FP16, Cores: 1, ACLayout: npu.LayoutNative, Driver: &lyingDriver{Driver: sim.New(sim.Options{}), done: map[npu.Mem]bool{}}})
	if e := nmse(run(t, bad, op, x), ref); e < 0.1 {
		t.Errorf("norm-packed B read as native: NMSE %.3g, want garbage (> 0.1)", e)
	}
}

// failingDriver's runs fail from run okRuns+1 on, as a device that was lost.
type failingDriver struct {
	npu.Driver
	okRuns int64
	runs   atomic.Int64
}

func (d *failingDriver) Create(info *npu.MatmulInfo) (npu.Context, npu.IOAttr, error) {
	ctx, attrs, err := d.Driver.Create(info)
	return &failingCtx{Context: ctx, d: d}, attrs, err
}

type failingCtx struct {
	npu.Context
	d *failingDriver
}

func (c *failingCtx) Run() error {
	if c.d.runs.Add(1) > c.d.okRuns {
		return &npu.Error{Func: "rknn_matmul_run", Code: npu.ErrDeviceUnavailable, Msg: "device lost"}
	}
	return c.Context.Run()
}

// lyingDriver repacks every B buffer in the norm layout (once) when it is
// bound to a context that says native.
type lyingDriver struct {
	npu.Driver
	done map[npu.Mem]bool
}

func (d *lyingDriver) Create(info *npu.MatmulInfo) (npu.Context, npu.IOAttr, error) {
	ctx, attrs, err := d.Driver.Create(info)
	return &lyingCtx{Context: ctx, d: d, info: *info}, attrs, err
}

type lyingCtx struct {
	npu.Context
	d    *lyingDriver
	info npu.MatmulInfo
}

func (c *lyingCtx) SetIOMem(m npu.Mem, attr *npu.TensorAttr) error {
	if attr.Name == "B" && !c.d.done[m] {
		c.d.done[m] = true
		k, n := int(c.info.K), int(c.info.N)
		vals := make([]float32, k*n)
		if err := npu.UnpackB(&c.info, m.Bytes(), vals, k, n); err != nil {
			return err
		}
		norm := c.info
		norm.BLayout = npu.LayoutNorm
		if err := npu.PackB(&norm, vals, k, n, m.Bytes()); err != nil {
			return err
		}
	}
	return c.Context.SetIOMem(m, attr)
}

func TestNonFiniteActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	w := randWeight(rng, "w", 64, 40)
	op := &engine.MatMulOp{Name: "Kcur-0", T: 3, K: 64, N: 40, Weight: w}
	x := randVec(rng, op.T*op.K)
	x[64+5] = float32(math.NaN()) // row 1
	for _, typ := range []Type{FP16, Int8, Int4} {
		out := run(t, newOffload(t, Config{Type: typ, Cores: 2, ACLayout: npu.LayoutNative}), op, x)
		for i, v := range out {
			if row := i / op.N; (row == 1) != math.IsNaN(float64(v)) {
				t.Fatalf("%s: out[%d] (row %d) = %v: NaN must reach exactly row 1", typ, i, row, v)
			}
		}
	}
}

// TestFallback: K beyond the RK3588 limit and ops not in a kernel list run on
// the CPU, bit for bit.
func TestFallback(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	big := randWeight(rng, "big", npu.MaxK+32, 16)
	op := &engine.MatMulOp{Name: "ffn_out-0", T: 1, K: big.K, N: 16, Weight: big}
	x := randVec(rng, op.K)
	ref := run(t, engine.NewCPUMatMul(engine.Exact, nil, nil), op, x)
	o := newOffload(t, Config{Type: FP16, ACLayout: npu.LayoutNative})
	if !slices.Equal(run(t, o, op, x), ref) {
		t.Error("K > 10240 fallback differs from the CPU")
	}
	plan, err := o.Prepare([]engine.MatMulOp{*op})
	if err != nil || plan[0].Device != "cpu" || !strings.Contains(plan[0].Reason, "10272 > 10240") {
		t.Errorf("plan %+v, %v", plan, err)
	}
	if s := o.Stats(); s.CPUCalls != 1 || s.NPUCalls != 0 {
		t.Errorf("stats %+v", s)
	}

	list := &kernels.List{Pairs: []kernels.Pair{kernels.NewPair("Qcur-0", 2, 64, 64)}}
	w := randWeight(rng, "w", 64, 64)
	o = newOffload(t, Config{Type: FP16, ACLayout: npu.LayoutNative, Kernels: list})
	q := &engine.MatMulOp{Name: "Qcur-0", T: 2, K: 64, N: 64, Weight: w}
	x = randVec(rng, 2*64)
	run(t, o, q, x)
	q1 := *q
	q1.T = 1 // same name, T not in the list
	run(t, o, &q1, x)
	q2 := *q
	q2.Name = "Qcur-1"
	run(t, o, &q2, x)
	if s := o.Stats(); s.NPUCalls != 1 || s.CPUCalls != 2 {
		t.Errorf("list offload stats %+v, want 1 NPU and 2 CPU calls", s)
	}
}

// TestLazyContextsAndEviction: auto mode creates contexts per new M and
// keeps at most MaxMs of them per weight.
func TestLazyContextsAndEviction(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	w := randWeight(rng, "w", 64, 64)
	o := newOffload(t, Config{Type: FP16, Cores: 2, ACLayout: npu.LayoutNative, MaxMs: 2})
	cpu := engine.NewCPUMatMul(engine.Exact, nil, nil)
	for _, T := range []int{1, 4, 1, 7, 4, 1} {
		op := &engine.MatMulOp{Name: "Qcur-0", T: T, K: 64, N: 64, Weight: w}
		x := randVec(rng, T*64)
		if e := nmse(run(t, o, op, x), run(t, cpu, op, x)); e > 1e-6 {
			t.Fatalf("T=%d: NMSE %.3g", T, e)
		}
		if s := o.Stats(); s.Contexts > 4 {
			t.Fatalf("T=%d: %d contexts alive, want ≤ 2 Ms × 2 cores", T, s.Contexts)
		}
	}
	if _, _, ok := o.Buffers(w, 1); !ok {
		t.Error("most recent M=1 was evicted")
	}
}

// TestDeviceErrorsPropagate: a failing run is an error naming the op.
func TestDeviceErrorsPropagate(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	w := randWeight(rng, "w", 64, 64)
	drv := &failingDriver{Driver: sim.New(sim.Options{}), okRuns: 2}
	o := newOffload(t, Config{Driver: drv, Type: FP16, Cores: 2, ACLayout: npu.LayoutNative})
	op := &engine.MatMulOp{Name: "attn_out-2", T: 1, K: 64, N: 64, Weight: w}
	x := randVec(rng, 64)
	run(t, o, op, x) // runs 1, 2
	err := o.MatMul(op, x, make([]float32, 64))
	if npu.Code(err) != npu.ErrDeviceUnavailable || !strings.Contains(err.Error(), "attn_out-2") {
		t.Errorf("err = %v, want the device's error naming attn_out-2", err)
	}
	if _, err := New(Config{Driver: drv, Type: FP16, Cores: 4}, engine.NewCPUMatMul(engine.Exact, nil, nil)); err == nil {
		t.Error("cores=4 accepted")
	}
}

// TestSegmentedKAndSaturation: 8192 < K ≤ 10240 uses the native B layout's
// K segments; int4 on constant inputs overflows int16 and is counted.
func TestSegmentedKAndSaturation(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	w := randWeight(rng, "w", 8224, 16)
	op := &engine.MatMulOp{Name: "ffn_out-0", T: 1, K: 8224, N: 16, Weight: w}
	x := randVec(rng, op.K)
	ref := run(t, engine.NewCPUMatMul(engine.Exact, nil, nil), op, x)
	if e := nmse(run(t, newOffload(t, Config{Type: FP16, Cores: 1, ACLayout: npu.LayoutNative}), op, x), ref); e > 1e-6 {
		t.Errorf("K=8224 fp16: NMSE %.3g", e)
	}
	if e := nmse(run(t, newOffload(t, Config{Type: Int8, Cores: 1, ACLayout: npu.LayoutNorm}), op, x), ref); e > 2e-4 {
		t.Errorf("K=8224 int8: NMSE %.3g", e)
	}

	ones := make([]byte, 4*1024*64)
	for i := range 1024 * 64 {
		binary.LittleEndian.PutUint32(ones[4*i:], math.Float32bits(1))
	}
	op = &engine.MatMulOp{Name: "x", T: 1, K: 1024, N: 64, Weight: &engine.Weight{Name: "ones", Type: ggml.F32, K: 1024, N: 64, Data: ones}}
	x = make([]float32, 1024)
	for i := range x {
		x[i] = 1
	}
	o := newOffload(t, Config{Type: Int4, Cores: 1, ACLayout: npu.LayoutNative})
	run(t, o, op, x) // 1024·7·7 = 50176 > 32767
	if s := o.Stats(); s.Saturated != 64 {
		t.Errorf("saturated %d, want 64", s.Saturated)
	}
}
