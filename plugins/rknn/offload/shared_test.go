package offload

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
)

// TestMatMulSharedAsMatMul: ops sharing their activations (Q, K, V) in one
// call give each op the bits its own MatMul gives, whichever ops join the
// device call: a weight kept on the CPU (cpu_ops), a tied weight given
// twice and an op of another K run on their own; calls and kernels are
// counted per op, and shadow mode compares every op.
func TestMatMulSharedAsMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	const T = 9 // parallelGatherRows or more: the gather goes to Config.Parallel
	q, v, k := randWeight(rng, "blk.0.attn_q.weight", 96, 300), randWeight(rng, "blk.0.attn_v.weight", 96, 64), randWeight(rng, "blk.0.attn_k.weight", 96, 172)
	g := randWeight(rng, "blk.0.ffn_gate.weight", 96, 40)
	short := randWeight(rng, "blk.0.ffn_down.weight", 64, 48)
	ops := []*engine.MatMulOp{
		{Name: "Qcur-0", T: T, K: 96, N: 300, Weight: q},
		{Name: "Vcur-0", T: T, K: 96, N: 64, Weight: v},
		{Name: "ffn_gate-0", T: T, K: 96, N: 40, Weight: g}, // cpu_ops
		{Name: "Kcur-0", T: T, K: 96, N: 172, Weight: k},
		{Name: "Qcur-0", T: T, K: 96, N: 300, Weight: q}, // the same kernel again
		{Name: "ffn_out-0", T: T, K: 64, N: 48, Weight: short},
	}
	x := randVec(rng, T*96)
	x[5] = float32(math.Inf(1)) // a row whose outputs are not finite
	for _, typ := range []Type{FP16, Int8, Int4} {
		cfg := Config{Type: typ, ACLayout: npu.LayoutNative, CPUOps: map[string]bool{"ffn_gate-0": true}, Shadow: true}
		one := newOffload(t, cfg)
		want := make([][]float32, len(ops))
		for i, op := range ops {
			want[i] = run(t, one, op, x)
		}
		// The shared call gathers its cores' C on a pool handing out the
		// smallest ranges, last first.
		cfg.Parallel = func(n, align int, fn func(lo, hi int)) {
			for hi := n; hi > 0; {
				lo := (hi - 1) / align * align
				fn(lo, hi)
				hi = lo
			}
		}
		shared := newOffload(t, cfg)
		outs := make([][]float32, len(ops))
		for i, op := range ops {
			outs[i] = make([]float32, op.T*op.N)
		}
		if err := shared.MatMulShared(ops, x, outs); err != nil {
			t.Fatal(err)
		}
		for i, op := range ops {
			for j := range outs[i] {
				if math.Float32bits(outs[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("%s %s: out[%d] = %v, alone %v", typ, op.Name, j, outs[i][j], want[i][j])
				}
			}
		}
		s, s1 := shared.Stats(), one.Stats()
		if s.NPUCalls != 5 || s.CPUCalls != 1 || s.NPURuns != s1.NPURuns {
			t.Errorf("%s: stats %+v, one op at a time %+v", typ, s, s1)
		}
		d, d1 := shared.Diagnostics("auto"), one.Diagnostics("auto")
		if len(d.Ops) != 4 || !slices.Equal(d.Ops, d1.Ops) || len(d.Kernels) != 4 || !slices.Equal(d.Kernels, d1.Kernels) {
			t.Errorf("%s: diagnostics %+v, one op at a time %+v", typ, d, d1)
		}
	}
}

// TestMatMulSharedDeviceError: a core failing in a shared call is an error
// naming the op it ran for.
func TestMatMulSharedDeviceError(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	drv := &failingDriver{Driver: sim.New(sim.Options{}), okRuns: 4}
	o := newOffload(t, Config{Driver: drv, Type: FP16, Cores: 2, ACLayout: npu.LayoutNative})
	ops := []*engine.MatMulOp{
		{Name: "Qcur-1", T: 1, K: 64, N: 64, Weight: randWeight(rng, "q", 64, 64)},
		{Name: "Kcur-1", T: 1, K: 64, N: 64, Weight: randWeight(rng, "k", 64, 64)},
	}
	outs := [][]float32{make([]float32, 64), make([]float32, 64)}
	if err := o.MatMulShared(ops, randVec(rng, 64), outs); err != nil { // runs 1-4
		t.Fatal(err)
	}
	err := o.MatMulShared(ops, randVec(rng, 64), outs)
	if npu.Code(err) != npu.ErrDeviceUnavailable || !strings.Contains(err.Error(), "Qcur-1") {
		t.Errorf("err = %v, want the device's error naming Qcur-1", err)
	}
}
