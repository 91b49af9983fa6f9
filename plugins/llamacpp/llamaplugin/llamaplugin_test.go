package llamaplugin

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/tokenizer"
	"github.com/evalrun/evalrun/plugins/llamacpp/llama"
)

const (
	models  = "../../../models"
	goldens = "../../../testdata/llamacpp"
)

var variants = map[string]string{
	"F32": "stories260K.gguf", "F16": "stories260K-f16.gguf", "Q8_0": "stories260K-q8_0.gguf", "Q4_0": "stories260K-q4_0.gguf",
}

// libDir is the installed llama.cpp (make llamacpp) or the test is skipped,
// saying why, so `go test` output shows it.
func libDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv(LibDirEnv); d != "" {
		return d
	}
	d, ok := RepoLibDir(".")
	if !ok {
		t.Skipf("llama.cpp libraries not installed (run `make llamacpp` or set %s): skipping the tests that need libllama", LibDirEnv)
	}
	return d
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func hostDigest(t *testing.T, path string) (string, []string) {
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
	vocab := make([]string, tok.VocabSize())
	for i := range vocab {
		vocab[i] = tok.Token(int32(i))
	}
	return backend.VocabDigest(len(vocab), func(i int) string { return vocab[i] }), vocab
}

func load(t *testing.T, model string, threads int, opts map[string]any) (*Backend, backend.LoadResult) {
	t.Helper()
	dir := libDir(t)
	o := map[string]any{"lib_dir": dir}
	for k, v := range opts {
		o[k] = v
	}
	path := abs(t, filepath.Join(models, model))
	digest, _ := hostDigest(t, path)
	b := New(Config{Name: "llamacpp", Version: "test"})
	res, err := b.Load(context.Background(), backend.LoadRequest{ModelPath: path, Threads: threads, NCtx: 512, Options: o, VocabDigest: digest})
	if err != nil {
		t.Fatalf("Load(%s): %v", model, err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b, res
}

func rows(t *testing.T, b *Backend, req backend.EvalRequest) [][]float32 {
	t.Helper()
	var out [][]float32
	want := req.LogitsFrom
	err := b.Eval(context.Background(), req, func(l backend.Logits) error {
		if l.Index != want {
			return fmt.Errorf("row %d arrived, want %d (rows must stream in order)", l.Index, want)
		}
		want++
		out = append(out, slices.Clone(l.Values))
		return nil
	})
	if err != nil {
		t.Fatalf("Eval(%+v): %v", req, err)
	}
	if len(out) != len(req.Tokens)-req.LogitsFrom {
		t.Fatalf("Eval: %d rows, want %d", len(out), len(req.Tokens)-req.LogitsFrom)
	}
	return out
}

func readF32(t *testing.T, path string) []float32 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// bitDiffs counts values that differ bit for bit, and the largest |Δ|.
func bitDiffs(got []float32, want []float32) (int, float64) {
	n, maxd := 0, 0.0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			n++
			maxd = math.Max(maxd, math.Abs(float64(got[i])-float64(want[i])))
		}
	}
	return n, maxd
}

// bitIdenticalVariants are the CPU backends with which this llama.cpp build
// reproduces the goldens (made by b10587 built for AVX512) bit for bit.
var bitIdenticalVariants = []string{"zen4", "skylakex", "icelake"}

// TestGoldensPlain: the plugin alone against llama.cpp's own goldens, plain
// configuration (flash attention off, F32 KV cache): the batch logits of
// p1..p3 and the 64 greedy steps after each, for every model variant, with
// 1 and 2 threads — bit for bit.
func TestGoldensPlain(t *testing.T) {
	libDir(t)
	cases, values := 0, 0
	defer func() {
		if !t.Failed() && !t.Skipped() {
			t.Logf("%d plain cases (logits + greedy steps of p1..p3 × F32/F16/Q8_0/Q4_0, with 1 and 2 threads): %d logits, all bit-identical", cases, values)
		}
	}()
	for _, threads := range []int{1, 2} {
		for _, variant := range []string{"F32", "F16", "Q8_0", "Q4_0"} {
			b, res := load(t, variants[variant], threads, nil)
			lib := llama.Loaded()
			if !slices.Contains(bitIdenticalVariants, lib.CPUVariant) {
				t.Skipf("ggml chose the CPU variant %q; the goldens are bit-identical only with %v", lib.CPUVariant, bitIdenticalVariants)
			}
			if threads == 1 && variant == "F32" {
				t.Logf("library: llama.cpp %s (%s), CPU variant %s; load: %s", lib.Version, lib.Commit, lib.CPUVariant, res.PlanSummary)
			}
			for _, p := range []string{"p1", "p2", "p3"} {
				name := fmt.Sprintf("%s.%s.plain", p, variant)
				var meta struct {
					TokenIDs []int32 `json:"token_ids"`
				}
				readJSON(t, filepath.Join(goldens, "logits", name+".json"), &meta)
				want := readF32(t, filepath.Join(goldens, "logits", name+".f32"))
				got := rows(t, b, backend.EvalRequest{Session: "logits", Pos: 0, Tokens: meta.TokenIDs})
				flat := slices.Concat(got...)
				if n, d := bitDiffs(flat, want); n > 0 || len(flat) != len(want) {
					t.Errorf("threads %d %s logits: %d of %d values differ (max |Δ| %g)", threads, name, n, len(want), d)
				}
				cases, values = cases+1, values+len(want)

				var gen struct {
					PromptIDs    []int32 `json:"prompt_ids"`
					GeneratedIDs []int32 `json:"generated_ids"`
				}
				readJSON(t, filepath.Join(goldens, "generate", name+".gen.json"), &gen)
				steps := readF32(t, filepath.Join(goldens, "generate", name+".steps.f32"))
				nv := res.Model.NVocab
				// Step 0 of the goldens is the last row of a decode with
				// logits for every row: for F32 and F16 weights llama.cpp's
				// output matmul picks its kernel by the number of rows, so
				// asking for the last row alone gives other bits.
				prompt := rows(t, b, backend.EvalRequest{Session: "gen", Pos: 0, Tokens: gen.PromptIDs})
				row := prompt[len(prompt)-1]
				diffSteps := 0
				for k, id := range gen.GeneratedIDs {
					if n, _ := bitDiffs(row, steps[k*nv:(k+1)*nv]); n > 0 {
						diffSteps++
					}
					if got := argmax(row); got != id {
						t.Errorf("threads %d %s step %d: argmax %d, llama.cpp generated %d", threads, name, k, got, id)
						break
					}
					if k+1 < len(gen.GeneratedIDs) {
						row = rows(t, b, backend.EvalRequest{Session: "gen", Pos: -1, Tokens: []int32{id}})[0]
					}
				}
				if diffSteps > 0 {
					t.Errorf("threads %d %s generation: %d of %d step rows differ", threads, name, diffSteps, len(gen.GeneratedIDs))
				}
				cases, values = cases+1, values+len(steps)
			}
		}
	}
}

func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// TestSessionsReuseTheCache: splitting a prompt over calls, interleaving
// sessions, truncating with pos and evicting the oldest session all give
// the rows of one plain decode.
func TestSessionsReuseTheCache(t *testing.T) {
	b, _ := load(t, variants["F32"], 2, nil)
	var meta struct {
		TokenIDs []int32 `json:"token_ids"`
	}
	readJSON(t, filepath.Join(goldens, "logits", "p3.F32.plain.json"), &meta)
	toks := meta.TokenIDs[:40]
	ref := rows(t, b, backend.EvalRequest{Session: "ref", Pos: 0, Tokens: toks})

	rows(t, b, backend.EvalRequest{Session: "a", Pos: 0, Tokens: toks[:17], LogitsFrom: 17})
	rows(t, b, backend.EvalRequest{Session: "b", Pos: 0, Tokens: toks[5:30]}) // another session in between
	got := rows(t, b, backend.EvalRequest{Session: "a", Pos: -1, Tokens: toks[17:]})
	for i, r := range got {
		if !reflect.DeepEqual(r, ref[17+i]) {
			t.Fatalf("continued session: row %d differs from one decode", 17+i)
		}
	}
	// Truncate to 10 and feed other tokens, then go back: the cache is cut.
	rows(t, b, backend.EvalRequest{Session: "a", Pos: 10, Tokens: []int32{5, 6, 7}, LogitsFrom: 3})
	got = rows(t, b, backend.EvalRequest{Session: "a", Pos: 10, Tokens: toks[10:20]})
	if !reflect.DeepEqual(got[9], ref[19]) {
		t.Fatal("after truncating with pos 10 the rows differ from one decode")
	}
	// Four more sessions evict "ref" (the least recently used) but not "a".
	for _, s := range []string{"c", "d", "e"} {
		rows(t, b, backend.EvalRequest{Session: s, Pos: 0, Tokens: toks[:3], LogitsFrom: 3})
	}
	rows(t, b, backend.EvalRequest{Session: "a", Pos: -1, Tokens: toks[20:21], LogitsFrom: 1})
	rows(t, b, backend.EvalRequest{Session: "f", Pos: 0, Tokens: toks[:3], LogitsFrom: 3})
	err := b.Eval(context.Background(), backend.EvalRequest{Session: "ref", Pos: -1, Tokens: toks[:1]}, func(backend.Logits) error { return nil })
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), "lost its KV cache") {
		t.Fatalf("continuing an evicted session: %v", err)
	}
	got = rows(t, b, backend.EvalRequest{Session: "ref", Pos: 0, Tokens: toks[:2]})
	if !reflect.DeepEqual(got[1], ref[1]) {
		t.Fatal("a restarted evicted session computes other rows")
	}
}

func TestFailedEvalLeavesSessionUnchanged(t *testing.T) {
	b, _ := load(t, variants["F32"], 1, nil)
	toks := []int32{1, 403, 407, 261, 378}
	ref := rows(t, b, backend.EvalRequest{Session: "ref", Pos: 0, Tokens: toks})
	rows(t, b, backend.EvalRequest{Session: "s", Pos: 0, Tokens: toks[:3], LogitsFrom: 3})
	stop := errors.New("stop")
	if err := b.Eval(context.Background(), backend.EvalRequest{Session: "s", Pos: -1, Tokens: []int32{9, 9, 9}}, func(backend.Logits) error { return stop }); err != stop {
		t.Fatalf("emit error: got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Eval(ctx, backend.EvalRequest{Session: "s", Pos: -1, Tokens: []int32{9}}, func(backend.Logits) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Eval: got %v", err)
	}
	got := rows(t, b, backend.EvalRequest{Session: "s", Pos: -1, Tokens: toks[3:]})
	if !reflect.DeepEqual(got[1], ref[4]) {
		t.Error("after failed calls the session moved")
	}
}

func TestEvalAndBenchValidate(t *testing.T) {
	b, _ := load(t, variants["F32"], 1, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		req  backend.EvalRequest
		text string
	}{
		{backend.EvalRequest{Pos: 0, Tokens: []int32{1, 512}}, "token 512 at index 1 outside the vocabulary [0, 512)"},
		{backend.EvalRequest{Pos: 0, Tokens: []int32{1, -3}}, "token -3 at index 1"},
		{backend.EvalRequest{Pos: 3, Tokens: []int32{1}}, `pos 3 outside -1..0 for session ""`},
		{backend.EvalRequest{Pos: -2, Tokens: []int32{1}}, "pos -2"},
		{backend.EvalRequest{Pos: 0, Tokens: []int32{1}, LogitsFrom: 2}, "logits_from 2 outside 0..1"},
		{backend.EvalRequest{Pos: 0, Tokens: make([]int32, 513)}, "exceed the context of 512"},
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

func TestBench(t *testing.T) {
	b, _ := load(t, variants["Q8_0"], 2, nil)
	toks := []int32{1, 403, 407, 261, 378}
	ref := rows(t, b, backend.EvalRequest{Session: "keep", Pos: 0, Tokens: toks})
	rows(t, b, backend.EvalRequest{Session: "keep", Pos: 0, Tokens: toks[:3], LogitsFrom: 3})
	res, err := b.Bench(context.Background(), backend.BenchRequest{NPrompt: 40, NGen: 8, Reps: 3, Warmup: true, Seed: 1, NBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	if res.NPrompt != 40 || res.NGen != 8 || len(res.SamplesNS) != 3 || res.WarmupNS <= 0 {
		t.Fatalf("Bench = %+v", res)
	}
	for _, s := range res.SamplesNS {
		if s <= 0 {
			t.Errorf("sample %d ns", s)
		}
	}
	got := rows(t, b, backend.EvalRequest{Session: "keep", Pos: -1, Tokens: toks[3:]})
	if !reflect.DeepEqual(got[1], ref[4]) {
		t.Error("Bench disturbed an Eval session")
	}
}

// posLog records how many tokens libllama's KV cache holds for the
// sequence (llama_memory_seq_pos_max + 1) at every decode.
type posLog struct {
	*benchContext
	cells []int
}

func (p *posLog) Decode(tokens []int32) error {
	p.cells = append(p.cells, p.c.SeqPosMax(0)+1)
	return p.benchContext.Decode(tokens)
}

// With a depth, libllama's KV cache holds n_depth tokens when each
// repetition's timed part starts: the depth prompt is decoded once, its
// state kept (llama_state_seq_get_data) and set back before the next
// repetitions (llama_state_seq_set_data), as llama-bench does.
func TestBenchDepth(t *testing.T) {
	b, _ := load(t, variants["Q8_0"], 2, nil)
	ctx := context.Background()
	req := backend.BenchRequest{NPrompt: 8, NGen: 2, NDepth: 40, Reps: 3, Seed: 1, NBatch: 16}
	res, err := b.Bench(ctx, req)
	if err != nil || res.NDepth != 40 || len(res.SamplesNS) != 3 {
		t.Fatalf("Bench: %+v, %v", res, err)
	}

	c, nBatch, err := b.benchContext(req)
	if err != nil {
		t.Fatal(err)
	}
	defer c.c.Free()
	p := &posLog{benchContext: c}
	if _, err := backend.RunBench(ctx, req, p, b.info.NVocab, nBatch, b.model.BOS()); err != nil {
		t.Fatal(err)
	}
	// Depth: chunks of 16, 16, 8 from an empty cache; then per repetition
	// the prompt at 40 and two tokens at 48 and 49.
	rep := []int{40, 48, 49}
	want := append(append(append([]int{0, 16, 32}, rep...), rep...), rep...)
	if !reflect.DeepEqual(p.cells, want) {
		t.Errorf("KV cache cells at each decode %v, want %v", p.cells, want)
	}
}

// TestVocabularyMismatchRefused: the host's vocabulary digest is checked.
func TestVocabularyMismatchRefused(t *testing.T) {
	dir := libDir(t)
	path := abs(t, filepath.Join(models, variants["F32"]))
	_, vocab := hostDigest(t, path)
	other := slices.Clone(vocab)
	other[300] += "x"
	b := New(Config{Name: "llamacpp"})
	ctx := context.Background()
	req := backend.LoadRequest{ModelPath: path, Threads: 1, Options: map[string]any{"lib_dir": dir},
		VocabDigest: backend.VocabDigest(len(other), func(i int) string { return other[i] })}
	_, err := b.Load(ctx, req)
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), "vocabulary differs from the host's") {
		t.Fatalf("Load with another vocabulary: %v", err)
	}
	if err := b.Eval(ctx, backend.EvalRequest{Tokens: []int32{1}}, func(backend.Logits) error { return nil }); !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("Eval after a refused Load: %v", err)
	}
	req.VocabDigest = backend.VocabDigest(len(vocab), func(i int) string { return vocab[i] })
	if _, err := b.Load(ctx, req); err != nil {
		t.Fatalf("Load with the host's vocabulary: %v", err)
	}
	b.Close(ctx)
}

func TestLoadOptionErrors(t *testing.T) {
	dir := libDir(t)
	path := abs(t, filepath.Join(models, variants["F32"]))
	b := New(Config{Name: "llamacpp"})
	ctx := context.Background()
	for _, tc := range []struct {
		opts map[string]any
		kind error
		text string
	}{
		{map[string]any{"flash": "on", "lib_dir": dir}, backend.ErrInvalidArgument, `unknown option "flash"`},
		{map[string]any{"lib_dir": filepath.Join(t.TempDir(), "none")}, backend.ErrInvalidArgument, `option "lib_dir"`}, // a typo: bad input (exit 2)
		{map[string]any{"lib_dir": t.TempDir()}, backend.ErrUnsupported, "no libllama in"},
		{map[string]any{"lib_dir": dir, "devices": []any{"NPU9"}}, backend.ErrInvalidArgument, `device "NPU9": the library has no such ggml device (it has: CPU)`},
	} {
		_, err := b.Load(ctx, backend.LoadRequest{ModelPath: path, Options: tc.opts})
		if !errors.Is(err, tc.kind) || !strings.Contains(fmt.Sprint(err), tc.text) {
			t.Errorf("Load(%v): err = %v; want %v containing %q", tc.opts, err, tc.kind, tc.text)
		}
	}
	// Validate checks the same without loading; a relative lib_dir starts at
	// the spec's directory.
	rel, err := filepath.Rel(filepath.Dir(dir), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Validate(ctx, backend.LoadRequest{ModelPath: path, BaseDir: filepath.Dir(dir), Options: map[string]any{"lib_dir": rel}}); err != nil {
		t.Errorf("Validate with lib_dir relative to the base dir: %v", err)
	}
	if _, err := b.Validate(ctx, backend.LoadRequest{ModelPath: path, Options: map[string]any{"lib_dir": "no/such/dir"}}); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Validate with a missing lib_dir: %v", err)
	}
	_, err = b.Load(ctx, backend.LoadRequest{ModelPath: filepath.Join(t.TempDir(), "none.gguf"), Options: map[string]any{"lib_dir": dir}})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing model: %v", err)
	}
	_, err = b.Load(ctx, backend.LoadRequest{ModelPath: abs(t, "backend.go"), Options: map[string]any{"lib_dir": dir}})
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(fmt.Sprint(err), "llama_model_load_from_file") {
		t.Errorf("not a model: %v", err)
	}
}

// TestDescribeReportsTheLibrary: once loaded, Describe names the llama.cpp
// version, commit, layout, CPU variant and devices.
func TestDescribeReportsTheLibrary(t *testing.T) {
	b, res := load(t, variants["F32"], 1, nil)
	info, err := b.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lib := llama.Loaded()
	t.Logf("info %+v; plan summary %q", info, res.PlanSummary)
	for _, want := range []string{"llama.cpp v0.5.0 (0ad4a86)", "ggml 0.25.1"} {
		if !strings.Contains(info.Version, want) {
			t.Errorf("Version %q lacks %q", info.Version, want)
		}
	}
	if info.Device != "llama.cpp CPU "+lib.CPUVariant || !slices.Contains(info.Capabilities, "cpu_variant:"+lib.CPUVariant) || !slices.Contains(info.Capabilities, "layout:v0.5.0") {
		t.Errorf("Describe = %+v", info)
	}
	if !strings.Contains(res.PlanSummary, "llama.cpp v0.5.0 (0ad4a86, layout v0.5.0), CPU "+lib.CPUVariant+", flash_attn off, kv f32, 1 threads") {
		t.Errorf("PlanSummary %q", res.PlanSummary)
	}
	m := res.Model
	if m.Arch != "llama" || m.NVocab != 512 || m.NLayer != 5 || m.NEmbd != 64 || m.NParams != 292800 || m.SizeBytes != 1171200 { // llama_model_size: the tensors' bytes, not the file's 1185376
		t.Errorf("ModelInfo %+v", m)
	}
}
