package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/synth"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/pipeline"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/report"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/plugins/llamacpp/llamaplugin"
)

// TestHostRunsThePlugin runs the real plugin binary under the evalrun host:
// llama.cpp as the reference, the same configuration as a candidate (equal
// bit for bit: KLD 0, max |Δ| 0), and a candidate whose libllama aborts
// (GGML_ASSERT, driven by fault_abort_after) — the host reports it
// `crashed` with the library's message, keeps the others' results and
// exits 3.
func TestHostRunsThePlugin(t *testing.T) {
	libDir, pluginDir := buildPlugin(t)
	tmp := t.TempDir()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	specText := `name: llamacpp-e2e
model:
  path: ` + filepath.Join(root, "models", "stories260K-q8_0.gguf") + `
datasets:
  - {name: stories, path: ` + filepath.Join(root, "datasets", "stories.jsonl") + `, mode: score, n_ctx: 64, limit: 6}
  - {name: openings, path: ` + filepath.Join(root, "datasets", "openings.jsonl") + `, mode: generate, max_new_tokens: 6, limit: 2}
reference:
  name: llama.cpp
  plugin: llamacpp
  threads: 2
  options: {lib_dir: ` + libDir + `}
backends:
  - name: llama.cpp-again
    plugin: llamacpp
    threads: 1
    options: {lib_dir: ` + libDir + `, kv_type: f32, flash_attn: "off"}
    gates: {kld_mean_max: 0, max_abs_diff_max: 0}
  - name: llama.cpp-abort
    plugin: llamacpp
    options: {lib_dir: ` + libDir + `, fault_abort_after: 1}
bench: {enabled: true, n_prompt: 16, n_gen: 4, reps: 2}
output: {dir: ` + filepath.Join(tmp, "results") + `, formats: [json, md]}
`
	p := planSpec(t, filepath.Join(tmp, "spec.yaml"), specText)
	var stdout, stderr bytes.Buffer
	res, err := pipeline.Run(context.Background(), p, pipeline.Options{PluginDir: pluginDir, Stderr: &stderr, Version: "test"})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, stderr.String())
	}
	sum := res.Summary
	if err := report.Print(&stdout, res, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", stdout.String())
	if sum.Reference.Status != summary.StatusOK || sum.Reference.Throughput == nil {
		t.Fatalf("reference: %s %s", sum.Reference.Status, sum.Reference.Error)
	}
	if sum.Reference.Load == nil || !strings.Contains(sum.Reference.Load.PlanSummary, "llama.cpp v0.5.0") {
		t.Errorf("the reference's load summary does not name the library: %+v", sum.Reference.Load)
	}
	again, abort := sum.Backends[0], sum.Backends[1]
	if again.Status != summary.StatusOK || !again.Pass {
		t.Errorf("same configuration: status %s pass %v error %q gates %+v", again.Status, again.Pass, again.Error, again.Gates)
	}
	if a := again.Accuracy; a == nil || a.Tokens == 0 || a.KLDMean == nil || *a.KLDMean != 0 || a.MaxAbsDiff == nil || *a.MaxAbsDiff != 0 {
		t.Errorf("same configuration with 1 and 2 threads is not bit-identical: %+v", again.Accuracy)
	}
	if abort.Status != summary.StatusCrashed || !strings.Contains(abort.Error, "GGML_ASSERT") {
		t.Errorf("aborting libllama: status %s, error %q; want crashed with the library's GGML_ASSERT message", abort.Status, abort.Error)
	}
	if sum.Verdict.ExitCode != exitcode.Backend {
		t.Errorf("exit code %d, want %d", sum.Verdict.ExitCode, exitcode.Backend)
	}
}

// planSpec writes a spec's text to path and plans it.
func planSpec(t *testing.T, path, text string) *plan.Plan {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(context.Background(), s)
	if err != nil {
		t.Fatalf("plan of %s: %v", path, err)
	}
	return p
}

// buildPlugin finds the installed libraries (or skips) and builds the plugin
// binary into a temporary directory.
func buildPlugin(t *testing.T) (libDir, pluginDir string) {
	t.Helper()
	libDir, ok := llamaplugin.RepoLibDir(".")
	if d := os.Getenv(llamaplugin.LibDirEnv); d != "" {
		libDir, ok = d, true
	}
	if !ok {
		t.Skipf("llama.cpp libraries not installed (run `make llamacpp` or set %s)", llamaplugin.LibDirEnv)
	}
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	pluginDir, err := builtPlugin()
	if err != nil {
		t.Fatal(err)
	}
	return libDir, pluginDir
}

// builtPlugin builds the binary once per test run (TestMain removes it).
var (
	buildDir    string
	builtPlugin = sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "evalrun-llamacpp-e2e-")
		if err != nil {
			return "", err
		}
		buildDir = dir
		return dir, testkit.Build(dir, map[string]string{"evalrun-plugin-llamacpp": "./plugins/llamacpp"})
	})
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// TestMalformedModelAbortsOnlyThePlugin: a real input that makes libllama
// abort — a GGUF whose vocabulary lists one text twice trips
// GGML_ASSERT(id_to_token.size() == token_to_id.size()) in llama-vocab.cpp.
// (`evalrun run` refuses such a file before any plugin starts, since the
// host's tokenizer rejects duplicates; `evalrun bench` loads it straight
// into the plugin.) The host sees a crash with the library's message.
func TestMalformedModelAbortsOnlyThePlugin(t *testing.T) {
	libDir, pluginDir := buildPlugin(t)
	model := filepath.Join(t.TempDir(), "duplicate-token.gguf")
	writeDuplicateTokenModel(t, filepath.Join("..", "..", "models", "stories260K.gguf"), model)

	ctx := context.Background()
	c, err := backend.Launch(ctx, backend.LaunchConfig{Path: filepath.Join(pluginDir, "evalrun-plugin-llamacpp")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	_, err = c.Load(ctx, backend.LoadRequest{ModelPath: model, Threads: 1, Options: map[string]any{"lib_dir": libDir}})
	if !errors.Is(err, backend.ErrCrashed) || !strings.Contains(fmt.Sprint(err), "GGML_ASSERT(id_to_token.size() == token_to_id.size()) failed") {
		t.Fatalf("Load of a vocabulary with a duplicate token: err = %v; want a crash with llama-vocab.cpp's GGML_ASSERT", err)
	}
	t.Logf("host saw: %v", err)
}

// writeDuplicateTokenModel copies a GGUF with token 300's text replaced by
// token 301's.
func writeDuplicateTokenModel(t *testing.T, src, dst string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		v := kv.Value
		if kv.Key == "tokenizer.ggml.tokens" {
			a := v.(gguf.Array)
			toks := append([]string(nil), a.Values.([]string)...)
			toks[300] = toks[301]
			v = gguf.Array{Elem: a.Elem, Values: toks}
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

// TestLlamaCppOnlySpecs: a spec whose every backend is llamacpp runs on an
// architecture evalrun's engine does not compute (synth.LlamaCppArchs, laid
// out as real conversions lay them out): the host plans it without the
// engine, and llama.cpp with flash attention off is compared with llama.cpp
// with it on and an F16 KV cache, to a verdict. The same file with an
// engine backend in the spec is refused before any plugin loads, naming the
// model and the architecture (exit 2).
func TestLlamaCppOnlySpecs(t *testing.T) {
	libDir, pluginDir := buildPlugin(t)
	if err := testkit.Build(pluginDir, map[string]string{"evalrun-plugin-cpu": "./plugins/cpu"}); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range synth.LlamaCppArchs {
		t.Run(arch, func(t *testing.T) {
			tmp := t.TempDir()
			model := filepath.Join(tmp, arch+".gguf")
			cfg := synth.Config{Arch: arch, NEmbd: 256, NLayer: 2, NHead: 4, NHeadKV: 2, NFF: 512, NVocab: 512, Type: ggml.Q8_0, Seed: 7, NormNoise: 0.1, NCtx: 1024}
			if err := synth.Generate(cfg, model); err != nil {
				t.Fatal(err)
			}
			write := func(name, candidate string) *plan.Plan {
				text := `name: ` + arch + `
model: {path: ` + model + `}
datasets:
  - {name: oracle, path: ` + filepath.Join(root, "datasets", "oracle.jsonl") + `, mode: score, n_ctx: 256, limit: 40}
reference:
  name: llama.cpp
  plugin: llamacpp
  threads: 2
  options: {lib_dir: ` + libDir + `, flash_attn: "off", kv_type: f32}
backends:
` + candidate + `
bench: {enabled: false}
output: {dir: ` + filepath.Join(tmp, "results") + `, formats: [json]}
`
				return planSpec(t, filepath.Join(tmp, name+".yaml"), text)
			}
			p := write("fa", `  - name: llama.cpp-fa-f16
    plugin: llamacpp
    threads: 2
    options: {lib_dir: `+libDir+`, flash_attn: "on", kv_type: f16}
    gates: {kld_mean_max: 0.01}`)
			var stderr bytes.Buffer
			res, err := pipeline.Run(context.Background(), p, pipeline.Options{PluginDir: pluginDir, Stderr: &stderr, Version: "test"})
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, stderr.String())
			}
			sum := res.Summary
			c := sum.Backends[0]
			if sum.Model.Arch != arch || sum.Reference.Status != summary.StatusOK || c.Status != summary.StatusOK || c.Accuracy == nil || c.Accuracy.Tokens == 0 {
				t.Fatalf("arch %q, reference %s %s, candidate %s %s: want both computed", sum.Model.Arch, sum.Reference.Status, sum.Reference.Error, c.Status, c.Error)
			}
			if code := sum.Verdict.ExitCode; code != 0 && code != 1 {
				t.Errorf("exit %d, want a verdict (0 or 1)", code)
			}
			t.Logf("%s: flash attention + F16 KV against the plain configuration: KLD %.3g over %d tokens, verdict %s", arch, *c.Accuracy.KLDMean, c.Accuracy.Tokens, sum.Verdict.Status)

			p = write("cpu", `  - {name: cpu, plugin: cpu}`)
			_, err = pipeline.Validate(context.Background(), p, pipeline.Options{PluginDir: pluginDir, Stderr: &stderr})
			var in *exitcode.InputError
			if !errors.As(err, &in) || !strings.Contains(err.Error(), model) || !strings.Contains(err.Error(), `unsupported architecture "`+arch+`"`) {
				t.Errorf("a cpu backend on %s: %v; want an input error naming the model and the architecture", arch, err)
			}
		})
	}
}
