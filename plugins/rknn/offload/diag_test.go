package offload

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// TestShadow: in shadow mode the model still gets the device's output, bit
// for bit, and each op's NMSE, cosine and max |Δ| against the CPU path are
// those of the outputs of all its calls taken together.
func TestShadow(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	w := randWeight(rng, "blk.0.ffn_down.weight", 96, 80)
	op := &engine.MatMulOp{Name: "ffn_out-0", T: 3, K: 96, N: 80, Weight: w}
	xs := [][]float32{randVec(rng, 3*96), randVec(rng, 3*96)}
	cpu := engine.NewCPUMatMul(engine.Exact, nil, nil)
	plain := newOffload(t, Config{Type: Int8, ACLayout: npu.LayoutNative})
	shadow := newOffload(t, Config{Type: Int8, ACLayout: npu.LayoutNative, Shadow: true})
	var outs, refs []float32
	for _, x := range xs {
		out := run(t, shadow, op, x)
		if !slices.Equal(out, run(t, plain, op, x)) {
			t.Fatal("shadow mode changed the device's output")
		}
		outs, refs = append(outs, out...), append(refs, run(t, cpu, op, x)...)
	}
	d := shadow.Diagnostics("auto")
	if !d.Shadow || len(d.Ops) != 1 {
		t.Fatalf("diagnostics %+v", d)
	}
	e := d.Ops[0]
	var errSq, refSq, dot, outSq, maxAbs float64
	for i := range outs {
		o, r := float64(outs[i]), float64(refs[i])
		errSq += (o - r) * (o - r)
		refSq += r * r
		outSq += o * o
		dot += o * r
		maxAbs = max(maxAbs, math.Abs(o-r))
	}
	if e.Op != "ffn_out-0" || e.Calls != 2 || e.Elements != int64(len(outs)) || e.NonFinite != 0 {
		t.Errorf("op %+v", e)
	}
	if rel(e.NMSE, errSq/refSq) > 1e-12 || rel(e.Cosine, dot/math.Sqrt(outSq*refSq)) > 1e-12 || e.MaxAbs != maxAbs {
		t.Errorf("NMSE %g cosine %g max %g, want %g %g %g", e.NMSE, e.Cosine, e.MaxAbs, errSq/refSq, dot/math.Sqrt(outSq*refSq), maxAbs)
	}
	if !(e.NMSE > 1e-6 && e.NMSE < 1e-3) || e.Cosine >= 1 {
		t.Errorf("int8 against the CPU: NMSE %g cosine %g, want a small error", e.NMSE, e.Cosine)
	}
	if len(d.Kernels) != 1 || d.Kernels[0] != (backend.KernelUse{Name: "ffn_out-0", Shape: "3×96×80", Calls: 2}) {
		t.Errorf("kernels %+v", d.Kernels)
	}
	if p := plain.Diagnostics("auto"); p.Shadow || len(p.Ops) != 0 || len(p.Kernels) != 1 {
		t.Errorf("without shadow: %+v", p)
	}
	shadow.ResetDiagnostics()
	if d := shadow.Diagnostics("auto"); len(d.Ops) != 0 || len(d.Kernels) != 0 {
		t.Errorf("after reset: %+v", d)
	}
}

func rel(a, b float64) float64 { return math.Abs(a-b) / math.Abs(b) }

// TestKernelAccounting: every entry of a kernel list is reported in list
// order with its device calls, 0 for one whose shape never occurs.
func TestKernelAccounting(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	w := randWeight(rng, "w", 64, 64)
	list := &kernels.List{Pairs: []kernels.Pair{kernels.NewPair("Qcur-0", 128, 64, 64), kernels.NewPair("Qcur-0", 2, 64, 64)}}
	o := newOffload(t, Config{Type: FP16, ACLayout: npu.LayoutNative, Kernels: list})
	q := &engine.MatMulOp{Name: "Qcur-0", T: 2, K: 64, N: 64, Weight: w}
	for range 3 {
		run(t, o, q, randVec(rng, 2*64))
	}
	q127 := *q
	q127.T = 127 // the score chunk's T: not the listed 128, so on the CPU
	run(t, o, &q127, randVec(rng, 127*64))
	d := o.Diagnostics("k.json")
	want := []backend.KernelUse{{Name: "Qcur-0", Shape: "128×64×64", Listed: true, Calls: 0}, {Name: "Qcur-0", Shape: "2×64×64", Listed: true, Calls: 3}}
	if d.KernelList != "k.json" || !slices.Equal(d.Kernels, want) {
		t.Errorf("kernels %+v, want %+v", d.Kernels, want)
	}
}

// TestCPUOps: an op named by cpu_ops, by op or weight name, stays on the
// CPU; names that are neither are refused.
func TestCPUOps(t *testing.T) {
	w := &engine.Weight{Name: "blk.3.ffn_down.weight", Type: 0, K: 64, N: 64}
	op := &engine.MatMulOp{Name: "ffn_out-3", T: 1, K: 64, N: 64, Weight: w}
	for _, name := range []string{"ffn_out-3", "blk.3.ffn_down", "blk.3.ffn_down.weight"} {
		if ok, why := Decide(Config{CPUOps: map[string]bool{name: true}}, op); ok || why != "cpu_ops" {
			t.Errorf("cpu_ops %q: offload %v (%s)", name, ok, why)
		}
	}
	if ok, why := Decide(Config{CPUOps: map[string]bool{"ffn_out-2": true}}, op); !ok {
		t.Errorf("another op kept on the CPU: %s", why)
	}
	ops := []engine.MatMulOp{*op}
	if err := CheckCPUOps([]string{"ffn_out-3", "blk.3.ffn_down"}, ops); err != nil {
		t.Error(err)
	}
	if err := CheckCPUOps([]string{"blk.3.ffn_dwn"}, ops); err == nil || !strings.Contains(err.Error(), `"blk.3.ffn_dwn" is neither`) {
		t.Errorf("typo accepted: %v", err)
	}
}
