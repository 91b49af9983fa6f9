package offload

import (
	"math"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/plugins/rknn/kernels"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
)

const modelF32 = "../../../models/stories260K.gguf"

// openOffloaded opens the model with cfg's offload attached as the plugin
// attaches it (MatMulShared included); nil cfg: CPU.
func openOffloaded(t *testing.T, path string, cfg *Config) (*engine.Model, *MatMuler, []backend.PlanEntry, string) {
	t.Helper()
	m, err := engine.Open(path, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if cfg == nil {
		return m, nil, nil, ""
	}
	if cfg.Driver == nil {
		cfg.Driver = sim.New(sim.Options{})
	}
	o, plan, summary, err := Attach(m, m.CPUMatMul(), *cfg, "list.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	m.UseMatMul(o)
	return m, o, plan, summary
}

func promptTokens(t *testing.T, m *engine.Model) []int32 {
	ids := m.Tokenizer().Encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park.", true)
	if len(ids) < 16 {
		t.Fatalf("only %d tokens", len(ids))
	}
	return ids
}

func decodeAll(t *testing.T, m *engine.Model, ids []int32) [][]float32 {
	t.Helper()
	var rows [][]float32
	s := m.NewSession(len(ids))
	// Prompt in one batch (T = len), then two single-token decodes (T = 1).
	n := len(ids) - 2
	emit := func(i int, l []float32) error { rows = append(rows, append([]float32(nil), l...)); return nil }
	if err := s.Decode(ids[:n], nil, emit); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[n:] {
		if err := s.Decode([]int32{id}, nil, emit); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

type logitDiff struct {
	maxAbs     float64
	argmaxSame int
	identical  bool
}

func compare(a, b [][]float32) logitDiff {
	d := logitDiff{identical: true}
	for i := range a {
		am, bm := 0, 0
		for j := range a[i] {
			d.maxAbs = max(d.maxAbs, math.Abs(float64(a[i][j])-float64(b[i][j])))
			d.identical = d.identical && math.Float32bits(a[i][j]) == math.Float32bits(b[i][j])
			if a[i][j] > a[i][am] {
				am = j
			}
			if b[i][j] > b[i][bm] {
				bm = j
			}
		}
		if am == bm {
			d.argmaxSame++
		}
	}
	return d
}

// TestWholeModelThroughSim: stories260K (F32) with every matmul on the
// simulated NPU: fp16 logits close to the CPU's but not bit-identical (the
// NPU really rounds to fp16), int8 further away.
func TestWholeModelThroughSim(t *testing.T) {
	ref, _, _, _ := openOffloaded(t, modelF32, nil)
	ids := promptTokens(t, ref)
	want := decodeAll(t, ref, ids)

	diffs := map[Type]logitDiff{}
	for _, typ := range []Type{FP16, Int8} {
		m, o, plan, summary := openOffloaded(t, modelF32, &Config{Type: typ, Cores: 3, ACLayout: npu.LayoutNative})
		wantSummary := "36 of 36 matmuls on the NPU (" + typ.String() + ", 3 cores)"
		if summary != wantSummary || len(plan) != 36 {
			t.Errorf("summary %q (%d entries), want %q", summary, len(plan), wantSummary)
		}
		got := decodeAll(t, m, ids)
		d := compare(got, want)
		diffs[typ] = d
		s := o.Stats()
		t.Logf("%s: max|Δlogit| %.4g, argmax equal %d/%d, NPU calls %d (runs %d), CPU calls %d",
			typ, d.maxAbs, d.argmaxSame, len(want), s.NPUCalls, s.NPURuns, s.CPUCalls)
		if s.CPUCalls != 0 || s.NPUCalls != 3*36 {
			t.Errorf("%s: %d NPU / %d CPU calls, want 108 / 0", typ, s.NPUCalls, s.CPUCalls)
		}
	}
	fp, i8 := diffs[FP16], diffs[Int8]
	if fp.identical || fp.maxAbs == 0 {
		t.Error("fp16 logits are bit-identical to the CPU's: the offload did not round")
	}
	if fp.maxAbs > 0.05 || fp.argmaxSame < len(want)-1 {
		t.Errorf("fp16: max|Δ| %.4g (want < 0.05), argmax equal %d/%d", fp.maxAbs, fp.argmaxSame, len(want))
	}
	if i8.maxAbs <= fp.maxAbs {
		t.Errorf("int8 max|Δ| %.4g not worse than fp16 %.4g", i8.maxAbs, fp.maxAbs)
	}
	if i8.maxAbs > 1 || i8.argmaxSame < len(want)*3/4 {
		t.Errorf("int8: max|Δ| %.4g, argmax equal %d/%d: too far", i8.maxAbs, i8.argmaxSame, len(want))
	}
}

// TestKernelListOnlyFFNUp0: a list with just ffn_up-0 at T=1 offloads only
// that op; the plan says so and so do the counters.
func TestKernelListOnlyFFNUp0(t *testing.T) {
	list := &kernels.List{Pairs: []kernels.Pair{kernels.NewPair("ffn_up-0", 1, 64, 172), kernels.NewPair("ffn_up-9", 1, 64, 172)}}
	m, o, plan, summary := openOffloaded(t, modelF32, &Config{Type: FP16, Cores: 3, ACLayout: npu.LayoutNative, Kernels: list})
	onNPU := 0
	for _, e := range plan {
		if e.Device == "npu" {
			onNPU++
			if e.Op != "ffn_up-0" || e.Shape != "1×64×172" {
				t.Errorf("on the NPU: %+v", e)
			}
		} else if e.Reason != "not in the kernel list" {
			t.Errorf("%s on the CPU for %q", e.Op, e.Reason)
		}
	}
	if onNPU != 1 || len(plan) != 36 {
		t.Errorf("%d of %d on the NPU", onNPU, len(plan))
	}
	for _, want := range []string{"1 of 36 matmuls on the NPU (fp16, 3 cores, kernel list list.json): ffn_up-0",
		"CPU (not in the kernel list): Qcur-0", "1 kernel list entries match no matmul of the model: ffn_up-9 1×64×172"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	ids := promptTokens(t, m)
	s := m.NewSession(8)
	for _, id := range ids[:3] { // T=1 each: ffn_up-0 matches every time
		if err := s.Decode([]int32{id}, nil, func(int, []float32) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Decode(ids[3:5], nil, func(int, []float32) error { return nil }); err != nil { // T=2: no match
		t.Fatal(err)
	}
	if st := o.Stats(); st.NPUCalls != 3 || st.CPUCalls != 3*35+36 || st.NPURuns != 9 {
		t.Errorf("stats %+v, want 3 NPU calls (9 runs) and 141 CPU calls", st)
	}
}

// TestQuantizedModelWeights: weights stored as Q4_0/Q8_0/F16 are dequantized
// before conversion; fp16 offload stays close to the CPU exact result.
func TestQuantizedModelWeights(t *testing.T) {
	path := "../../../models/stories260K-q4_0.gguf"
	ref, _, _, _ := openOffloaded(t, path, nil)
	ids := promptTokens(t, ref)[:8]
	want := decodeAll(t, ref, ids)
	m, _, _, _ := openOffloaded(t, path, &Config{Type: FP16, Cores: 2, ACLayout: npu.LayoutNorm})
	d := compare(decodeAll(t, m, ids), want)
	if d.identical || d.maxAbs > 0.02 || d.argmaxSame < len(want)-1 {
		t.Errorf("q4_0 model, fp16 offload: %+v", d)
	}
}
