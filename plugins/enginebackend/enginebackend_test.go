package enginebackend

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/tokenizer"
)

const (
	modelF32  = "../../models/stories260K.gguf"
	modelQ8   = "../../models/stories260K-q8_0.gguf"
	goldenP1  = "../../testdata/llamacpp/logits/p1.F32.plain.f32"
	nVocab260 = 512
)

// "Once upon a time" with BOS, as llama.cpp tokenizes it; it predicts 432.
var onceUponATime = []int32{1, 403, 407, 261, 378}

func abs(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, cfg Config, req backend.LoadRequest) (*Backend, backend.LoadResult) {
	t.Helper()
	if cfg.Name == "" {
		cfg = Config{Name: "cpu", Version: "test", Device: "cpu"}
	}
	b := New(cfg)
	if req.ModelPath == "" {
		req.ModelPath = abs(t, modelF32)
	}
	res, err := b.Load(context.Background(), req)
	if err != nil {
		t.Fatalf("Load(%s): %v", req.ModelPath, err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b, res
}

// rows runs Eval and returns copies of the rows by index.
func rows(t *testing.T, b backend.Backend, req backend.EvalRequest) map[int]backend.Logits {
	t.Helper()
	out := map[int]backend.Logits{}
	err := b.Eval(context.Background(), req, func(l backend.Logits) error {
		l.Values = append([]float32(nil), l.Values...)
		out[l.Index] = l
		return nil
	})
	if err != nil {
		t.Fatalf("Eval(%+v): %v", req, err)
	}
	return out
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func readGolden(t *testing.T, path string, row, n int) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < (row+1)*n*4 {
		t.Fatalf("%s: %d bytes, too short for row %d", path, len(raw), row)
	}
	v := make([]float32, n)
	for j := range v {
		v[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[(row*n+j)*4:]))
	}
	return v
}

func TestLoadReportsModelAndPlan(t *testing.T) {
	_, res := load(t, Config{}, backend.LoadRequest{Threads: 2})
	m := res.Model
	if m.Arch != "llama" || m.NVocab != nVocab260 || m.NLayer != 5 || m.NEmbd != 64 || m.NParams <= 0 || m.NCtxTrain <= 0 {
		t.Errorf("model info %+v does not describe stories260K", m)
	}
	if m.FileType != "all F32 (guessed)" {
		t.Errorf("file type %q, want \"all F32 (guessed)\"", m.FileType)
	}
	if len(res.Plan) != 7*5+1 || res.PlanSummary != "all 36 matmuls on the CPU" {
		t.Fatalf("plan has %d entries, summary %q", len(res.Plan), res.PlanSummary)
	}
	if p := res.Plan[0]; p.Op != "Qcur-0" || p.Device != "cpu" || p.Shape != "1×64×64" {
		t.Errorf("first plan entry %+v", p)
	}
	if p := res.Plan[len(res.Plan)-1]; p.Op != "result_output" || p.Shape != "1×64×512" {
		t.Errorf("last plan entry %+v", p)
	}
	if res.LoadNS <= 0 || res.WarmupNS <= 0 || res.MemoryBytes <= 0 {
		t.Errorf("load %d ns, warm-up %d ns, memory %d bytes: want all positive", res.LoadNS, res.WarmupNS, res.MemoryBytes)
	}
}

func TestEvalMatchesLlamaCpp(t *testing.T) {
	b, _ := load(t, Config{}, backend.LoadRequest{})
	got := rows(t, b, backend.EvalRequest{Session: "p1", Pos: 0, Tokens: onceUponATime})
	if len(got) != len(onceUponATime) {
		t.Fatalf("got %d rows, want %d", len(got), len(onceUponATime))
	}
	for i := range onceUponATime {
		r := got[i]
		if r.Index != i || r.Pos != i || len(r.Values) != nVocab260 {
			t.Fatalf("row %d: index %d pos %d, %d values", i, r.Index, r.Pos, len(r.Values))
		}
		want := readGolden(t, goldenP1, i, nVocab260)
		maxDiff := 0.0
		for j := range want {
			maxDiff = math.Max(maxDiff, math.Abs(float64(r.Values[j]-want[j])))
		}
		if maxDiff > 1e-3 || argmax(r.Values) != argmax(want) {
			t.Errorf("row %d: max |diff| to llama.cpp %.3g, argmax %d vs %d", i, maxDiff, argmax(r.Values), argmax(want))
		}
	}
	if a := argmax(got[4].Values); a != 432 {
		t.Errorf("last row argmax %d, want 432", a)
	}
}

// maxDiff is the largest absolute difference between two rows.
func maxDiff(a, b []float32) float64 {
	d := 0.0
	for j := range a {
		d = math.Max(d, math.Abs(float64(a[j]-b[j])))
	}
	return d
}

// splitRef evaluates the prompt as 3 + 2 tokens in session name and returns
// the last row. The engine follows llama.cpp's kernels, whose rounding depends
// on the batch size, so bit-for-bit comparisons use the same batch shapes.
func splitRef(t *testing.T, b backend.Backend, name string) []float32 {
	t.Helper()
	rows(t, b, backend.EvalRequest{Session: name, Pos: 0, Tokens: onceUponATime[:3], LogitsFrom: 3})
	return rows(t, b, backend.EvalRequest{Session: name, Pos: -1, Tokens: onceUponATime[3:], LogitsFrom: 1})[1].Values
}

func TestSessionsContinueTruncateAndStayApart(t *testing.T) {
	b, _ := load(t, Config{}, backend.LoadRequest{})
	whole := rows(t, b, backend.EvalRequest{Session: "whole", Pos: 0, Tokens: onceUponATime})

	// The same prompt in two calls continues the session: same prediction,
	// logits equal up to the batch-size dependent rounding.
	rows(t, b, backend.EvalRequest{Session: "split", Pos: 0, Tokens: onceUponATime[:3], LogitsFrom: 3})
	tail := rows(t, b, backend.EvalRequest{Session: "split", Pos: -1, Tokens: onceUponATime[3:]})
	if len(tail) != 2 || tail[0].Pos != 3 || tail[1].Pos != 4 {
		t.Fatalf("continued session: %d rows, positions %d, %d", len(tail), tail[0].Pos, tail[1].Pos)
	}
	if d := maxDiff(tail[1].Values, whole[4].Values); d > 1e-4 || argmax(tail[1].Values) != 432 {
		t.Errorf("continued session: max |diff| %.3g to the one-call rows, argmax %d", d, argmax(tail[1].Values))
	}
	// Another session is independent of "split".
	if other := splitRef(t, b, "other"); !reflect.DeepEqual(other, tail[1].Values) {
		t.Error("a second session with the same calls gave different logits")
	}
	// Truncating to position 3 after other tokens and re-feeding gives the
	// same rows again.
	rows(t, b, backend.EvalRequest{Session: "split", Pos: -1, Tokens: []int32{5, 6, 7}, LogitsFrom: 3})
	again := rows(t, b, backend.EvalRequest{Session: "split", Pos: 3, Tokens: onceUponATime[3:], LogitsFrom: 1})
	if len(again) != 1 || again[1].Pos != 4 || !reflect.DeepEqual(again[1].Values, tail[1].Values) {
		t.Errorf("truncate to 3: got rows %v", again)
	}
	// Pos 0 resets.
	reset := rows(t, b, backend.EvalRequest{Session: "split", Pos: 0, Tokens: onceUponATime})
	if !reflect.DeepEqual(reset[4].Values, whole[4].Values) {
		t.Error("pos 0 did not reset the session")
	}
}

func TestEvalSplitsLongRequests(t *testing.T) {
	b, _ := load(t, Config{}, backend.LoadRequest{NCtx: EvalBatch + 8})
	n := EvalBatch + 3
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(1 + i%500)
	}
	from := EvalBatch - 2
	got := rows(t, b, backend.EvalRequest{Session: "long", Pos: 0, Tokens: tokens, LogitsFrom: from})
	if len(got) != n-from {
		t.Fatalf("got %d rows, want %d", len(got), n-from)
	}
	for i := from; i < n; i++ {
		if got[i].Pos != i {
			t.Errorf("row %d has pos %d", i, got[i].Pos)
		}
	}
	// Same rows as feeding the second chunk separately.
	rows(t, b, backend.EvalRequest{Session: "two", Pos: 0, Tokens: tokens[:EvalBatch], LogitsFrom: EvalBatch})
	second := rows(t, b, backend.EvalRequest{Session: "two", Pos: -1, Tokens: tokens[EvalBatch:]})
	if !reflect.DeepEqual(second[2].Values, got[n-1].Values) {
		t.Error("last row differs between one long request and two requests")
	}
}

func TestThreadsAndNumerics(t *testing.T) {
	// 64 tokens: the bundled model's prefill matmuls of that many rows are
	// large enough for the engine to split them over threads (engine.Small).
	tokens := slices.Repeat(onceUponATime, 13)[:64]
	last := func(path string, threads int, numerics string) []float32 {
		b, _ := load(t, Config{}, backend.LoadRequest{ModelPath: abs(t, path), Threads: threads, Options: map[string]any{"numerics": numerics}})
		v := rows(t, b, backend.EvalRequest{Pos: 0, Tokens: tokens, LogitsFrom: 63})[63].Values
		if len(v) == 0 {
			t.Fatalf("no logits for the last of %d tokens", len(tokens))
		}
		return v
	}
	one, two := last(modelQ8, 1, "exact"), last(modelQ8, 2, "exact")
	if !reflect.DeepEqual(one, two) {
		t.Error("logits differ between 1 and 2 threads")
	}
	ggml := last(modelQ8, 2, "ggml")
	if reflect.DeepEqual(one, ggml) {
		t.Error("numerics=ggml gave the same Q8_0 logits as exact: the option did not reach the engine")
	}
	b, _ := load(t, Config{}, backend.LoadRequest{ModelPath: abs(t, modelQ8), Threads: 2, Options: map[string]any{"kv_cache": map[string]any{"key": "int8_asym", "value": "FP8_E4M3"}}})
	if kv := rows(t, b, backend.EvalRequest{Pos: 0, Tokens: onceUponATime, LogitsFrom: 4})[4].Values; reflect.DeepEqual(one, kv) {
		t.Error("kv_cache int8_asym/fp8_e4m3 gave the f32 cache's logits: the option did not reach the engine")
	}
}

func TestBadRequests(t *testing.T) {
	ctx := context.Background()
	b := New(Config{Name: "cpu"})
	err := b.Eval(ctx, backend.EvalRequest{Tokens: []int32{1}}, func(backend.Logits) error { return nil })
	if !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("Eval before Load: %v", err)
	}
	if _, err := b.Bench(ctx, backend.BenchRequest{NPrompt: 1, Reps: 1}); !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("Bench before Load: %v", err)
	}
	model := abs(t, modelF32)
	for _, tc := range []struct {
		req  backend.LoadRequest
		kind error
		text string
	}{
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"numercs": "exact"}}, backend.ErrInvalidArgument, `unknown option "numercs" (valid options: kv_cache, numerics, swa_full, weights)`},
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"weights": "mlock"}}, backend.ErrInvalidArgument, `option "weights": "mlock" is not one of auto, mmap, copy`},
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"kv_cache": map[string]any{"key": "fp8_e4m3"}}}, backend.ErrInvalidArgument, `option "kv_cache": key: "fp8_e4m3" unknown (want f32, f16, q8_0, int8_asym)`},
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"kv_cache": map[string]any{"value": "int4"}}}, backend.ErrInvalidArgument, `option "kv_cache": value: "int4" unknown`},
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"kv_cache": map[string]any{"keys": "f16"}}}, backend.ErrInvalidArgument, `unknown option "kv_cache.keys" (valid options in "kv_cache": key, value)`},
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"kv_cache": "f16"}}, backend.ErrInvalidArgument, `option "kv_cache": want an object {key, value}, got "f16"`},
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"kv_cache": map[string]any{"key": 8}}}, backend.ErrInvalidArgument, `option "kv_cache.key": want a string, got 8`},
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"numerics": "fast"}}, backend.ErrInvalidArgument, `option "numerics": unknown numerics "fast"`},
		{backend.LoadRequest{ModelPath: model, Options: map[string]any{"numerics": 1.0}}, backend.ErrInvalidArgument, `option "numerics"`},
		{backend.LoadRequest{ModelPath: model, Threads: -1}, backend.ErrInvalidArgument, "threads -1"},
		{backend.LoadRequest{}, backend.ErrInvalidArgument, "model_path is empty"},
		{backend.LoadRequest{ModelPath: filepath.Join(t.TempDir(), "none.gguf")}, fs.ErrNotExist, "none.gguf"},
		{backend.LoadRequest{ModelPath: abs(t, "enginebackend.go")}, backend.ErrInvalidArgument, "enginebackend.go"},
	} {
		_, err := b.Load(ctx, tc.req)
		if !errors.Is(err, tc.kind) || !strings.Contains(fmt.Sprint(err), tc.text) {
			t.Errorf("Load(%+v): err = %v; want %v containing %q", tc.req, err, tc.kind, tc.text)
		}
	}

	b, _ = load(t, Config{}, backend.LoadRequest{NCtx: 8})
	for _, tc := range []struct {
		req  backend.EvalRequest
		text string
	}{
		{backend.EvalRequest{Pos: 0, Tokens: []int32{1, 512}}, "token 512 at index 1 outside the vocabulary [0, 512)"},
		{backend.EvalRequest{Pos: 0, Tokens: []int32{1, -3}}, "token -3 at index 1"},
		{backend.EvalRequest{Pos: 3, Tokens: []int32{1}}, `pos 3 outside -1..0 for session ""`},
		{backend.EvalRequest{Pos: -2, Tokens: []int32{1}}, "pos -2"},
		{backend.EvalRequest{Pos: 0, Tokens: []int32{1}, LogitsFrom: 2}, "logits_from 2 outside 0..1"},
		{backend.EvalRequest{Pos: 0, Tokens: make([]int32, 9)}, "exceed the context of 8"},
	} {
		err := b.Eval(ctx, tc.req, func(backend.Logits) error { return nil })
		if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), tc.text) {
			t.Errorf("Eval(%+v): err = %v; want InvalidArgument containing %q", tc.req, err, tc.text)
		}
	}
	for _, req := range []backend.BenchRequest{{Reps: 1}, {NPrompt: 4, Reps: 0}, {NPrompt: -1, Reps: 1}, {NGen: 1, Reps: 1, NBatch: -1}} {
		if _, err := b.Bench(ctx, req); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("Bench(%+v): err = %v, want InvalidArgument", req, err)
		}
	}
}

func TestFailedEvalLeavesSessionUnchanged(t *testing.T) {
	b, _ := load(t, Config{}, backend.LoadRequest{})
	want := splitRef(t, b, "ref")
	rows(t, b, backend.EvalRequest{Session: "s", Pos: 0, Tokens: onceUponATime[:3], LogitsFrom: 3})

	stop := errors.New("stop")
	err := b.Eval(context.Background(), backend.EvalRequest{Session: "s", Pos: -1, Tokens: []int32{9, 9, 9}}, func(backend.Logits) error { return stop })
	if err != stop {
		t.Fatalf("emit error: got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Eval(ctx, backend.EvalRequest{Session: "s", Pos: -1, Tokens: []int32{9}}, func(backend.Logits) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Eval: got %v", err)
	}
	got := rows(t, b, backend.EvalRequest{Session: "s", Pos: -1, Tokens: onceUponATime[3:]})
	if got[1].Pos != 4 || !reflect.DeepEqual(got[1].Values, want) {
		t.Errorf("after failed calls the session moved: pos %d", got[1].Pos)
	}
}

// recorder is a Device that logs every matmul and claims none.
type recorder struct {
	cpu     engine.MatMuler
	mu      sync.Mutex
	ops     []string
	plan    []backend.PlanEntry
	summary string
	closed  int
	armed   int
}

func (r *recorder) Plan() ([]backend.PlanEntry, string) { return r.plan, r.summary }
func (r *recorder) Close() error                        { r.closed++; return nil }

// recording attaches rec as the device, with no options of its own.
func recording(rec *recorder) OptionsParser {
	return DeviceOptions(func(m *engine.Model, _ *struct{}) (Device, error) {
		rec.cpu = m.CPUMatMul()
		return rec, nil
	})
}

func (r *recorder) MatMul(op *engine.MatMulOp, x, out []float32) error {
	r.mu.Lock()
	r.ops = append(r.ops, fmt.Sprintf("%s/%d", op.Name, op.T))
	r.mu.Unlock()
	return r.cpu.MatMul(op, x, out)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := r.ops
	r.ops = nil
	return ops
}

func count(ops []string, name string) int {
	n := 0
	for _, o := range ops {
		if o == name {
			n++
		}
	}
	return n
}

func TestBenchFollowsLlamaBench(t *testing.T) {
	rec := &recorder{}
	b, _ := load(t, Config{Name: "rec", Options: recording(rec)}, backend.LoadRequest{})
	rows(t, b, backend.EvalRequest{Session: "keep", Pos: 0, Tokens: onceUponATime[:3], LogitsFrom: 3})
	rec.take()

	res, err := b.Bench(context.Background(), backend.BenchRequest{NPrompt: 10, NGen: 3, Reps: 2, Warmup: true, Seed: 42, NBatch: 4})
	if err != nil {
		t.Fatalf("Bench: %v", err)
	}
	if res.NPrompt != 10 || res.NGen != 3 || len(res.SamplesNS) != 2 || res.WarmupNS <= 0 {
		t.Fatalf("Bench = %+v", res)
	}
	for _, s := range res.SamplesNS {
		if s <= 0 {
			t.Errorf("sample %d ns", s)
		}
	}
	ops := rec.take()
	// Per prompt: chunks of 4, 4, 2 tokens, each with one output row; per tg
	// token one decode of 1. Warm-up: a prompt and 1 token; then 2 × (prompt + 3).
	prompts, gens := 1+2, 1+2*3
	if got := count(ops, "Qcur-0/4"); got != 2*prompts {
		t.Errorf("Qcur-0 with T=4: %d calls, want %d", got, 2*prompts)
	}
	if got := count(ops, "Qcur-0/2"); got != prompts {
		t.Errorf("Qcur-0 with T=2: %d calls, want %d", got, prompts)
	}
	if got := count(ops, "Qcur-0/1"); got != gens {
		t.Errorf("Qcur-0 with T=1: %d calls, want %d", got, gens)
	}
	heads := 0
	for _, o := range ops {
		if strings.HasPrefix(o, "result_output/") {
			heads++
		}
	}
	if got, want := count(ops, "result_output/1"), 3*prompts+gens; got != want || heads != want {
		t.Errorf("output head: %d calls with one row of %d in all, want %d (logits only for each chunk's last token)", got, heads, want)
	}

	// Bench has its own session: "keep" continues as if nothing happened.
	want := splitRef(t, b, "ref")
	cont := rows(t, b, backend.EvalRequest{Session: "keep", Pos: -1, Tokens: onceUponATime[3:], LogitsFrom: 1})
	if !reflect.DeepEqual(cont[1].Values, want) {
		t.Error("Bench disturbed an Eval session")
	}
}

type rknnLike struct {
	Cores   int    `json:"cores"`
	Kernels string `json:"kernels"`
	Secret  int    `json:"-"`
}

func (o *rknnLike) Validate() error {
	if o.Cores == 0 {
		o.Cores = 3
	}
	if o.Cores < 1 || o.Cores > 3 {
		return fmt.Errorf("option \"cores\": %d, want 1..3", o.Cores)
	}
	return nil
}

func (o *rknnLike) ResolvePaths(dir string) {
	if o.Kernels != "" && o.Kernels != "all" && !filepath.IsAbs(o.Kernels) {
		o.Kernels = filepath.Join(dir, o.Kernels)
	}
}

func (o *rknnLike) Warnings() []string {
	if o.Cores == 1 {
		return []string{"one core"}
	}
	return nil
}

// Validate checks what Load would, without loading the model or attaching
// the device: options, paths in them (relative to the spec's directory),
// warnings, and the model as the engine binds it.
func TestValidateLoadsNothing(t *testing.T) {
	var got *rknnLike
	b := New(Config{Name: "npu-ish", Options: DeviceOptions(func(m *engine.Model, opts *rknnLike) (Device, error) {
		got = opts
		return nil, errors.New("attach must not run")
	})})
	ctx := context.Background()
	req := backend.LoadRequest{ModelPath: modelF32, BaseDir: "/spec/dir", Options: map[string]any{"kernels": "k.json", "cores": 1}}
	warnings, err := b.Validate(ctx, req)
	if err != nil || !reflect.DeepEqual(warnings, []string{"one core"}) || got != nil {
		t.Fatalf("Validate: %v %v (attach ran: %v)", warnings, err, got != nil)
	}
	missing := req
	missing.ModelPath = "/no/such/model.gguf"
	if _, err := b.Validate(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing model: %v, want fs.ErrNotExist", err)
	}
	// A model the engine does not compute is refused by name.
	notGGUF := filepath.Join(t.TempDir(), "gemma.gguf")
	if err := os.WriteFile(notGGUF, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing.ModelPath = notGGUF
	if _, err := b.Validate(ctx, missing); !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), notGGUF) {
		t.Errorf("a truncated model: %v, want ErrInvalidArgument naming it", err)
	}
	_, attach, _, _ := b.parse(req)
	attach(nil)
	if got.Kernels != "/spec/dir/k.json" {
		t.Errorf("kernels %q, want it relative to the base dir", got.Kernels)
	}
	for opts, want := range map[string]map[string]any{
		`unknown option "typo"`: {"typo": 1},
		`option "cores"`:        {"cores": 7},
		`option "numerics"`:     {"numerics": "fast"},
	} {
		if _, err := b.Validate(ctx, backend.LoadRequest{ModelPath: "m", Options: want}); !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), opts) {
			t.Errorf("%v: %v", want, err)
		}
	}
}

// armedRecorder is a recorder with faults to arm.
type armedRecorder struct {
	*recorder
	onArm func()
}

func (a armedRecorder) Arm() { a.armed++; a.onArm() }

func TestDeviceAndPluginOptions(t *testing.T) {
	var gotOpts *rknnLike
	rec := &recorder{plan: []backend.PlanEntry{{Op: "Qcur-0", Device: "npu", Shape: "1×64×64"}}, summary: "1 of 36 matmuls on the NPU"}
	warmOps := -1
	cfg := Config{
		Name: "npu-ish",
		Options: DeviceOptions(func(m *engine.Model, opts *rknnLike) (Device, error) {
			gotOpts = opts
			if gotOpts.Kernels == "fail" {
				return nil, errors.New("kernel list rejected")
			}
			rec.cpu = m.CPUMatMul()
			return armedRecorder{rec, func() { warmOps = len(rec.ops) }}, nil
		}),
	}
	b, res := load(t, cfg, backend.LoadRequest{Options: map[string]any{"kernels": "all", "numerics": "exact"}})
	if gotOpts == nil || gotOpts.Cores != 3 || gotOpts.Kernels != "all" {
		t.Errorf("hook got options %+v", gotOpts)
	}
	if res.PlanSummary != "1 of 36 matmuls on the NPU" || len(res.Plan) != 1 || res.Plan[0].Device != "npu" {
		t.Errorf("plan %+v / %q is not the hook's", res.Plan, res.PlanSummary)
	}
	if ops := rec.take(); len(ops) != 36 || warmOps != 36 || rec.armed != 1 {
		t.Errorf("warm-up sent %d matmuls through the device, want 36, and then armed it (%d times, after %d ops)", len(ops), rec.armed, warmOps)
	}
	if res.Kernels == "" {
		t.Error("LoadResult does not name the CPU kernels")
	}
	rows(t, b, backend.EvalRequest{Pos: 0, Tokens: onceUponATime})
	if ops := rec.take(); count(ops, "result_output/5") != 1 {
		t.Errorf("Eval did not go through the hook: %v", ops)
	}

	ctx := context.Background()
	for _, tc := range []struct {
		opts map[string]any
		text string
	}{
		{map[string]any{"core": 1}, `unknown option "core" (valid options: cores, kernels, kv_cache, numerics, swa_full, weights)`},
		{map[string]any{"cores": "two"}, `option "cores": want an integer, got "two"`},
		{map[string]any{"cores": 7}, `option "cores": 7, want 1..3`},
		{map[string]any{"Secret": 7}, `unknown option "Secret"`},
		{map[string]any{"swa_full": "no"}, `option "swa_full": want true or false, got "no"`},
	} {
		_, err := b.Load(ctx, backend.LoadRequest{ModelPath: abs(t, modelF32), Options: tc.opts})
		if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), tc.text) {
			t.Errorf("Load(%v): err = %v; want InvalidArgument containing %q", tc.opts, err, tc.text)
		}
	}
	_, err := b.Load(ctx, backend.LoadRequest{ModelPath: abs(t, modelF32), Options: map[string]any{"kernels": "fail"}})
	if err == nil || !strings.Contains(err.Error(), "kernel list rejected") {
		t.Errorf("hook error: got %v", err)
	}
}

func TestCloseReleasesTheDevice(t *testing.T) {
	var dev *recorder
	b := New(Config{Name: "dev", Options: DeviceOptions(func(m *engine.Model, _ *struct{}) (Device, error) {
		dev = &recorder{cpu: m.CPUMatMul()}
		return dev, nil
	})})
	ctx := context.Background()
	req := backend.LoadRequest{ModelPath: "../../models/stories260K.gguf", Threads: 1}
	if _, err := b.Load(ctx, req); err != nil {
		t.Fatal(err)
	}
	first := dev
	if _, err := b.Load(ctx, req); err != nil { // a reload releases the previous device matmul
		t.Fatal(err)
	}
	if first.closed != 1 || dev.closed != 0 {
		t.Fatalf("after reload: first closed %d, second %d", first.closed, dev.closed)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if dev.closed != 1 {
		t.Fatalf("Close did not release the device matmul (%d)", dev.closed)
	}
}

func TestLoadChecksTheHostsVocabulary(t *testing.T) {
	tok := loadTokenizer(t, modelF32)
	vocab := make([]string, tok.VocabSize())
	for i := range vocab {
		vocab[i] = tok.Token(int32(i))
	}
	digest := func(v []string) string { return backend.VocabDigest(len(v), func(i int) string { return v[i] }) }

	// The host's own vocabulary (the Q8_0 file has the same one) is accepted.
	load(t, Config{}, backend.LoadRequest{ModelPath: abs(t, modelQ8), VocabDigest: digest(vocab)})

	other := append([]string(nil), vocab...)
	other[300] += "x"
	b := New(Config{Name: "cpu"})
	_, err := b.Load(context.Background(), backend.LoadRequest{ModelPath: abs(t, modelF32), VocabDigest: digest(other)})
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), "not the one the host tokenizes with") {
		t.Fatalf("a different vocabulary: err = %v, want InvalidArgument about the host's vocabulary", err)
	}
	if err := b.Eval(context.Background(), backend.EvalRequest{Tokens: []int32{1}}, func(backend.Logits) error { return nil }); !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("after a refused Load, Eval: %v, want ErrNotLoaded", err)
	}
}

func loadTokenizer(t *testing.T, path string) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestHiddenRows: the rows asked for carry n_layer×n_embd hidden values,
// the same whether asked alone or with others and whatever the batch
// split; the rest carry none; a row outside the logits rows is refused.
// The CPU plugin has no diagnostics.
func TestHiddenRows(t *testing.T) {
	b, res := load(t, Config{}, backend.LoadRequest{Threads: 2})
	toks := []int32{1, 403, 407, 260, 426, 19, 300, 11}
	got := rows(t, b, backend.EvalRequest{Session: "h", Pos: 0, Tokens: toks, LogitsFrom: 2, HiddenRows: []int{2, 7}})
	n := res.Model.NLayer * res.Model.NEmbd
	for i, l := range got {
		if (i == 2 || i == 7) != (l.Hidden != nil) {
			t.Fatalf("row %d: hidden %v", i, l.Hidden != nil)
		}
		if l.Hidden != nil && len(l.Hidden) != n {
			t.Fatalf("row %d: %d hidden values, want %d", i, len(l.Hidden), n)
		}
	}
	alone := rows(t, b, backend.EvalRequest{Session: "h2", Pos: 0, Tokens: toks, LogitsFrom: 7, HiddenRows: []int{7}})
	if !slices.Equal(alone[7].Hidden, got[7].Hidden) {
		t.Error("row 7's hidden states depend on which rows were asked for")
	}
	if slices.Equal(got[2].Hidden[:64], got[2].Hidden[64:128]) || slices.Equal(got[2].Hidden, got[7].Hidden) {
		t.Error("hidden states do not differ between layers or rows")
	}
	err := b.Eval(context.Background(), backend.EvalRequest{Session: "h3", Pos: 0, Tokens: toks, LogitsFrom: 4, HiddenRows: []int{3}}, func(backend.Logits) error { return nil })
	if !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("hidden row before logits_from: %v", err)
	}
	if _, err := b.Diagnostics(context.Background()); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("cpu diagnostics: %v, want ErrUnsupported", err)
	}
}

// posLog records the session's position (n_past) at every decode.
type posLog struct {
	*benchSession
	at []int
}

func (p *posLog) Decode(tokens []int32) error {
	p.at = append(p.at, p.Pos())
	return p.benchSession.Decode(tokens)
}

// tg2 @ d512 runs with 512 tokens in the session's KV cache: the depth
// prompt (one chunk of 512) is decoded once, outside the clock, and every
// repetition's generated tokens are decoded at n_past 512 and 513, the
// session truncated back to the depth in between. A model with sliding
// windows, whose cache cells later positions overwrite, decodes the depth
// again instead.
func TestBenchDepth(t *testing.T) {
	rec := &recorder{}
	b, _ := load(t, Config{Name: "rec", Options: recording(rec)}, backend.LoadRequest{})
	rec.take() // Load's warm-up
	ctx := context.Background()
	req := backend.BenchRequest{NGen: 2, NDepth: 512, Reps: 3, Warmup: true, Seed: 1}
	res, err := b.Bench(ctx, req)
	if err != nil || res.NDepth != 512 || len(res.SamplesNS) != 3 {
		t.Fatalf("Bench: %+v, %v", res, err)
	}
	ops := rec.take()
	if n, m := count(ops, "Qcur-0/512"), count(ops, "Qcur-0/1"); n != 1 || m != 1+3*2 {
		t.Errorf("Qcur-0: %d decodes of 512 tokens, %d of 1; want the depth once and 1+3×2 tokens", n, m)
	}

	req.Warmup = false
	s := &posLog{benchSession: b.benchSession(req)}
	if _, err := backend.RunBench(ctx, req, s, nVocab260, req.Batch(), 1); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 512, 513, 512, 513, 512, 513}; !reflect.DeepEqual(s.at, want) {
		t.Errorf("n_past at each decode %v, want %v", s.at, want)
	}
	w := &posLog{benchSession: b.benchSession(req)}
	w.window = true
	if _, err := backend.RunBench(ctx, req, w, nVocab260, req.Batch(), 1); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 512, 513, 0, 512, 513, 0, 512, 513}; !reflect.DeepEqual(w.at, want) {
		t.Errorf("sliding windows: n_past at each decode %v, want %v", w.at, want)
	}
}

// The model's size and parameters are llama_model_size's and
// llama_model_n_params': the tensors' data bytes, not the file's size. The
// figures are llama-bench b10587's model_size and model_n_params for these
// files (-o csv).
func TestLoadReportsLlamaBenchSize(t *testing.T) {
	for file, size := range map[string]int64{
		"stories260K.gguf":        1171200, // a file of 1185376 bytes
		"stories260K-f16.gguf":    587008,
		"stories260K-q8_0.gguf":   364768,
		"stories260K-q4_0.gguf":   262624,
		"stories260K-q4_k_m.gguf": 289696,
	} {
		_, res := load(t, Config{}, backend.LoadRequest{ModelPath: abs(t, filepath.Join("../../models", file))})
		if m := res.Model; m.SizeBytes != size || m.NParams != 292800 {
			t.Errorf("%s: %d bytes, %d parameters; llama-bench: %d, 292800", file, m.SizeBytes, m.NParams, size)
		}
	}
}

// TestWeightsOption: weights: auto maps the file in a plugin whose device
// evicts offloaded weights (rknn), where a copy would keep them twice; the
// option said outright is obeyed.
func TestWeightsOption(t *testing.T) {
	for _, c := range []struct {
		mapWeights bool
		option     any // nil: not given
		want       engine.WeightsLoad
	}{
		{false, nil, engine.WeightsAuto},
		{true, nil, engine.WeightsMmap},
		{true, "auto", engine.WeightsMmap},
		{true, "copy", engine.WeightsCopy},
		{false, "mmap", engine.WeightsMmap},
	} {
		b := New(Config{Name: "t", MapWeights: c.mapWeights})
		req := backend.LoadRequest{ModelPath: abs(t, modelF32)}
		if c.option != nil {
			req.Options = map[string]any{"weights": c.option}
		}
		opts, _, _, err := b.parse(req)
		if err != nil || opts.Weights != c.want {
			t.Errorf("MapWeights %v, weights %v: %v, %v; want %v", c.mapWeights, c.option, opts.Weights, err, c.want)
		}
	}
}
