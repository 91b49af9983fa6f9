package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/internal/testkit"
)

// TestPreflightRefusesBeforeAnyPluginComputes: every class of bad input
// that run finds before any backend computes, through `evalrun validate`
// and `evalrun run`: exit 2, the spec's file:line where there is one, no
// backend loaded, nothing written, and quickly (each is timed; the bound
// only catches a hang, the figures are in the test log).
func TestPreflightRefusesBeforeAnyPluginComputes(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "specs", "p.yaml") // relative paths start here, not at the cwd
	if err := os.MkdirAll(filepath.Dir(spec), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := evalrun(t, nil, "kernels", "--model", "models/stories260K.gguf", "--out", filepath.Join(dir, "kern.json")); r.code != 0 {
		t.Fatalf("kernels: %d %s", r.code, r.stderr)
	}
	// A vocabulary that differs in one entry.
	f, err := gguf.Open(testkit.Path("models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	f.Close()
	toks = append([]string(nil), toks...)
	toks[300] = "not-the-same"
	otherVocab := rewriteModel(t, "tokenizer.ggml.tokens", gguf.Array{Elem: gguf.TypeString, Values: toks})

	// Nothing unmodelled is computed: a tensor the llama graph does not
	// have (Qwen3's Q norm), a key that changes the math (Gemma's softcap).
	unboundTensor := rewriteModelWith(t, "", nil, "blk.0.attn_q_norm.weight")
	softcap := rewriteModel(t, "llama.final_logit_softcapping", float32(30))

	// A backend's own model is checked as the reference's.
	badBOS := rewriteModel(t, "tokenizer.ggml.bos_token_id", uint32(100000))
	shortCtx := rewriteModel(t, "llama.context_length", uint32(32))
	badTokenizer := rewriteModel(t, "tokenizer.ggml.model", "banana")

	base := strings.ReplaceAll(caseSpec, "ROOT", testkit.Root())
	rknn := func(opts string) string {
		return strings.Replace(base, "    plugin: cpu\n", "    plugin: rknn\n    options: "+opts+"\n", 1)
	}
	cases := []struct {
		name, spec string
		env        []string
		want       string
	}{
		{"unknown EVALRUN_ variable", base, []string{"EVALRUN_BENCH_REP=1"}, "$EVALRUN_BENCH_REP: names no spec key (EVALRUN_ + a key path in upper case) and no other evalrun variable (did you mean EVALRUN_BENCH_REPS?)"},
		{"plugin not found", strings.Replace(base, "    plugin: cpu\n", "    plugin: rknx\n", 1), nil, `p.yaml:8: backends[0].plugin: find plugin "rknx": no evalrun-plugin-rknx in`},
		{"plugin_path not found", strings.Replace(base, "    plugin: cpu\n", "    plugin_path: ../no-such-plugin\n", 1), nil, "p.yaml:8: backends[0].plugin_path: " + filepath.Join(dir, "no-such-plugin") + ": no such file"},
		{"unknown option", rknn("{typo_opt: 1}"), nil, `p.yaml:9: backends[0].options.typo_opt: cand refused its options: unknown option "typo_opt"`},
		{"invalid option", rknn("{type: fp17}"), nil, `p.yaml:9: backends[0].options.type: cand refused its options: option "type"`},
		{"option path missing", rknn("{kernels: ../no-kern.json}"), nil, `p.yaml:9: backends[0].options.kernels: cand refused its options: option "kernels": open ` + filepath.Join(dir, "no-kern.json")},
		{"reference model with a tensor the engine does not bind", strings.Replace(base, testkit.Path("models", "stories260K.gguf"), unboundTensor, 1), nil,
			"reference.model: ref refused the model: model " + unboundTensor + `: tensor "blk.0.attn_q_norm.weight": not part of evalrun's llama graph`},
		{"rknn backend model with a key the engine does not model", rknn("{type: fp16}\n    model: " + softcap), nil,
			"backends[0].model: cand refused the model: model " + softcap + ": metadata llama.final_logit_softcapping: not modelled by evalrun's llama graph"},
		{"backend model with BOS outside the vocabulary", strings.Replace(base, "    threads: 1\n", "    threads: 1\n    model: "+badBOS+"\n", 1), nil,
			"p.yaml:10: backends[0].model: " + badBOS + ": tokenizer.ggml.bos_token_id 100000 is outside the vocabulary of 512 tokens"},
		{"backend model with a shorter context", strings.Replace(base, "    threads: 1\n", "    threads: 1\n    model: "+shortCtx+"\n", 1), nil,
			"p.yaml:10: backends[0].model: " + shortCtx + ": context_length 32, but the run feeds 64 positions"},
		{"backend model whose tokenizer the engine lacks (its path said once)", strings.Replace(base, "    threads: 1\n", "    threads: 1\n    model: "+badTokenizer+"\n", 1), nil,
			"p.yaml:10: backends[0].model: cand refused the model: model " + badTokenizer + `: tokenizer.ggml.model: unsupported tokenizer model "banana"`},
		{"model with another vocabulary", strings.Replace(base, "    threads: 1\n", "    threads: 1\n    model: "+otherVocab+"\n", 1), nil, "p.yaml:10: backends[0].model: " + otherVocab + ": vocabulary entry 300 is \"not-the-same\""},
	}
	for _, c := range cases {
		for _, cmd := range []string{"validate", "run"} {
			t.Run(c.name+"/"+cmd, func(t *testing.T) {
				if err := os.WriteFile(spec, []byte(c.spec), 0o644); err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(dir, "out-"+cmd)
				args := []string{cmd, spec}
				if cmd == "run" {
					args = append(args, "--out", out)
				}
				t0 := time.Now()
				r := evalrun(t, c.env, args...)
				took := time.Since(t0)
				t.Logf("exit %d after %v", r.code, took.Round(time.Millisecond))
				if r.code != 2 || !strings.Contains(r.stderr, c.want) {
					t.Errorf("exit %d, want 2 and %q in\n%s", r.code, c.want, r.stderr)
				}
				if strings.Contains(r.stderr, "backend loaded") {
					t.Errorf("a backend loaded its model before the refusal:\n%s", r.stderr)
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("run wrote %s before the refusal (%v)", out, err)
				}
				if took > 10*time.Second {
					t.Errorf("took %v", took)
				}
			})
		}
	}
	// The same spec with a kernel list that exists beside it is valid: the
	// path is the spec directory's, whatever the working directory.
	if err := os.WriteFile(spec, []byte(rknn("{kernels: ../kern.json}")), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := evalrun(t, nil, "validate", spec); r.code != 0 || !strings.Contains(r.stdout, "valid (2 backends, 0 warnings)") {
		t.Errorf("valid spec: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Nothing unmodelled is computed outside a run either: the engine commands
// and the engine plugins' Load (through bench; hexagon's is the same
// enginebackend Load, not built for these tests) refuse a model with a
// tensor the engine does not bind, naming it, with exit 2.
func TestEngineCommandsRefuseUnmodelledModels(t *testing.T) {
	model := rewriteModelWith(t, "", nil, "blk.0.attn_q_norm.weight")
	for _, args := range [][]string{
		{"logits", "--model", model, "--tokens", "1,2", "--out", filepath.Join(t.TempDir(), "l.bin")},
		{"generate", "--model", model, "--prompt", "hi", "-n", "2"},
		{"bench", "--model", model, "--plugin", "cpu", "-p", "8", "-n", "2", "-r", "1"},
		{"bench", "--model", model, "--plugin", "rknn", "-p", "8", "-n", "2", "-r", "1"},
	} {
		r := evalrun(t, nil, args...)
		if want := `tensor "blk.0.attn_q_norm.weight": not part of evalrun's llama graph`; r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("evalrun %s: exit %d, want 2 and %q in\n%s", strings.Join(args[:3], " "), r.code, want, r.stderr)
		}
	}
}

// TestSmallRefusalsNameTheValue: the smaller refusals say what is wrong
// with the value given, with exit 2.
func TestSmallRefusalsNameTheValue(t *testing.T) {
	cache := t.TempDir()
	formats := writeCase(t, caseSpec+"output: {formats: []}\n")
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"EVALRUN_PLUGIN_MTLS=banana"}, []string{"validate", writeCase(t, caseSpec)}, `$EVALRUN_PLUGIN_MTLS="banana": want on or off`},
		{nil, []string{"cache", "prune", "--dir", cache, "--max-bytes", "0"}, "--max-bytes 0: must be positive"},
		{nil, []string{"cache", "prune", "--dir", cache, "--max-bytes", "-5"}, "--max-bytes -5: must be positive"},
		{nil, []string{"cache", "prune", "--dir", cache, "--max-age", "0s"}, "--max-age 0s: must be positive"},
		{nil, []string{"validate", formats}, "output.formats: empty: want at least one of json, jsonl, md, junit, html"},
	} {
		r := evalrun(t, c.env, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v evalrun %s: exit %d, want 2 and %q in\n%s", c.env, strings.Join(c.args, " "), r.code, c.want, r.stderr)
		}
	}
}
