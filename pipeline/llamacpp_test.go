package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/synth"
	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/plugins/enginebackend"
)

// engineLauncher serves every backend with the real engine in-process (the
// CPU plugin's code without its process), so the whole pipeline runs on
// real logits quickly.
func engineLauncher(_ context.Context, _ spec.Backend, _ Launch) (backend.Backend, Process, error) {
	be := enginebackend.New(enginebackend.Config{Name: "cpu", Version: "test", Device: "cpu"})
	return be, noProc{}, nil
}

type noProc struct{}

func (noProc) Exited() bool           { return false }
func (noProc) Kill()                  {}
func (noProc) PeakRSS() (int64, bool) { return 0, false }

func loadPlan(t *testing.T, path string, env map[string]string) *plan.Plan {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	s, err := spec.Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runEngine(t *testing.T, p *plan.Plan) *summary.Summary {
	t.Helper()
	var errb bytes.Buffer
	res, err := Run(context.Background(), p, Options{OutDir: t.TempDir(), Stderr: &errb, Launch: engineLauncher})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, errb.String())
	}
	return res.Summary
}

// within checks |ours − theirs| ≤ the larger of the two ± values (and a
// floor for figures llama.cpp prints with few digits).
func within(t *testing.T, what string, ours, oursErr, theirs, theirsErr, floor float64) {
	t.Helper()
	tol := math.Max(math.Max(oursErr, theirsErr), floor)
	t.Logf("%-28s ours %.6f ± %.6f   llama.cpp %.6f ± %.6f", what, ours, oursErr, theirs, theirsErr)
	if math.Abs(ours-theirs) > tol {
		t.Errorf("%s: ours %.6f, llama.cpp %.6f: differ by more than %.6f", what, ours, theirs, tol)
	}
}

// TestKLDBaseAgreesWithLlamaCpp runs configs/kld-base.yaml (our CPU backend
// in ggml numerics on the Q8_0 and Q4_0 files against llama.cpp's own F32
// --kl-divergence-base file) and checks that the statistics agree with the
// blocks llama-perplexity printed for the same pairs, within their ±. Then it
// writes a base file of its own from the F32 model, reads it back as the
// reference, and checks the Q8_0 statistics come out the same again.
func TestKLDBaseAgreesWithLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine over 1512 positions per backend")
	}
	p := loadPlan(t, filepath.Join("..", "configs", "kld-base.yaml"), nil)
	sum := runEngine(t, p)
	got := map[string]*summary.Accuracy{}
	for _, b := range sum.Backends {
		if b.Status != summary.StatusOK || b.Accuracy == nil || b.Accuracy.ScoredTokens != 1512 {
			t.Fatalf("%s: %s %q", b.Name, b.Status, b.Error)
		}
		got[b.Name] = b.Accuracy
	}
	check := func(backendName, stdout string, a *summary.Accuracy) {
		want := testkit.LlamaStats(t, stdout)
		t.Logf("%s vs %s", backendName, stdout)
		within(t, "KLD mean", *a.KLDMean, *a.KLDMeanErr, want["Mean KLD"][0], want["Mean KLD"][1], 0)
		within(t, "same top p", *a.SameTopP, *a.SameTopPErr, want["Same top p"][0], want["Same top p"][1], 0)
		within(t, "RMS Δp", *a.RMSDp, *a.RMSDpErr, want["RMS Δp"][0], want["RMS Δp"][1], 0)
		within(t, "PPL(Q)", *a.PPL, *a.PPLErr, want["Mean PPL(Q)"][0], want["Mean PPL(Q)"][1], 0)
		within(t, "PPL(Q)/PPL(base)", *a.PPLRatio, *a.PPLRatioErr, want["Mean PPL(Q)/PPL(base)"][0], want["Mean PPL(Q)/PPL(base)"][1], 0)
		// PPL(base) comes from the file alone: it must match to print precision.
		within(t, "PPL(base)", *a.PPLBase, 0, want["Mean PPL(base)"][0], 0, 1e-6)
	}
	check("q8_0", "kld.Q8_0.plain.stdout.txt", got["q8_0"])
	check("q4_0", "kld.Q4_0.plain.stdout.txt", got["q4_0"])

	// Write our own base file from the F32 model (exact numerics) on the same
	// token stream: the F32 backend runs against llama.cpp's base file and
	// writes its logits with output.kld_base.
	base := filepath.Join(t.TempDir(), "ours.kld")
	w := loadPlan(t, filepath.Join("..", "configs", "kld-base.yaml"), nil)
	c := &w.Spec.Candidates
	*c = (*c)[:1]
	(*c)[0].Name, (*c)[0].Model, (*c)[0].Options, (*c)[0].Output.KLDBase = "f32", p.Model.Path, map[string]any{"numerics": "exact"}, base
	f32 := runEngine(t, w).Backends[0].Accuracy
	// Our F32 against llama.cpp's F32: the difference is the base file's
	// 16-bit quantization alone.
	if *f32.KLDMean > 1e-4 || *f32.SameTopP < 0.999 {
		t.Fatalf("our F32 vs llama.cpp's F32 base: KLD %v, same top %v", *f32.KLDMean, *f32.SameTopP)
	}

	again := loadPlan(t, filepath.Join("..", "configs", "kld-base.yaml"), map[string]string{"EVALRUN_REFERENCE_KLD_BASE": base})
	again.Spec.Candidates = again.Spec.Candidates[:1]
	s2 := runEngine(t, again)
	a2 := s2.Backends[0].Accuracy
	a1 := got["q8_0"]
	within(t, "own base: KLD mean", *a2.KLDMean, *a2.KLDMeanErr, *a1.KLDMean, *a1.KLDMeanErr, 0)
	within(t, "own base: same top p", *a2.SameTopP, *a2.SameTopPErr, *a1.SameTopP, *a1.SameTopPErr, 0)
	within(t, "own base: RMS Δp", *a2.RMSDp, *a2.RMSDpErr, *a1.RMSDp, *a1.RMSDpErr, 0)
	within(t, "own base: PPL(base)", *a2.PPLBase, *a2.PPLBaseErr, *a1.PPLBase, *a1.PPLBaseErr, 0)
}

// llamaPerplexity is llama.cpp b10587's llama-perplexity from the shared
// tools beside the repository (../shared/tools/llama.cpp), or
// EVALRUN_LLAMA_PERPLEXITY; the test skips, saying so, where it is absent
// or does not run on this CPU (it is built for the machine kind's ISA).
func llamaPerplexity(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("EVALRUN_LLAMA_PERPLEXITY")
	if bin == "" {
		bin = filepath.Join("..", "..", "shared", "tools", "llama.cpp", "llama-perplexity")
	}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil {
		t.Skipf("llama.cpp b10587's llama-perplexity does not run here (%v: %s): set EVALRUN_LLAMA_PERPLEXITY", err, bytes.TrimSpace(out))
	}
	return bin
}

// TestKLDBaseOfLlamaCppB10587 holds the engine's ggml numerics to llama.cpp
// b10587's own tools on the layouts Llama 3.2 (rope_freqs, freq_base
// 500000), llama with every optional bias and a head size of its own,
// Qwen3, Gemma 3 and Gemma 2 (sliding windows in llama-perplexity's ring
// cache), Phi-3-128k (long RoPE factors) and GLM-4: llama-perplexity writes a --kl-divergence-base file over 2048-token
// chunks, and the CPU backend scored against it agrees to the base file's
// 16-bit rounding (KLD <= 1e-6, same top >= 99.8 %).
func TestKLDBaseOfLlamaCppB10587(t *testing.T) {
	if testing.Short() {
		t.Skip("runs llama-perplexity and the engine over 8k tokens per model")
	}
	bin := llamaPerplexity(t)
	dir := t.TempDir()
	var text []string
	f, err := os.Open(filepath.Join("..", "datasets", "oracle.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		text = append(text, r.Text)
	}
	f.Close()
	textPath := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(textPath, []byte(strings.Join(text, " ")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		cfg     synth.Config
		options string // the cpu backend's beyond numerics
	}{
		{"llama3.2-rope-freqs", synth.Config{Arch: "llama", RopeFreqs: true, RopeBase: 500000}, ""},
		{"llama-biases-headdim", synth.Config{Arch: "llama", Biases: true, HeadDim: 128}, ""},
		{"qwen3", synth.Config{Arch: "qwen3", RopeBase: 1000000}, ""},
		// llama-perplexity's sliding-window cache is a ring (swa_full off),
		// the cpu plugin's default; windows of 100 and 300 cross it many
		// times in 2048 positions.
		{"gemma3", synth.Config{Arch: "gemma3", SlidingWindow: 100, SWAPattern: 2, RopeBase: 1000000, RopeBaseSWA: 10000,
			RopeScaling: "linear", RopeFactor: 8}, ""},
		{"gemma2", synth.Config{Arch: "gemma2", SlidingWindow: 300}, ""},
		{"phi3-longrope", synth.Config{Arch: "phi3", LongRope: true, RopeOrigCtx: 512}, ""},
		{"glm4", synth.Config{Arch: "glm4"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NHeadKV, cfg.NFF, cfg.NVocab = 256, 2, 4, 2, 768, 512
			cfg.Type, cfg.Seed, cfg.NCtx, cfg.NormNoise = ggml.Q8_0, 11, 4096, 0.2
			model := filepath.Join(dir, c.name+".gguf")
			if err := synth.Generate(cfg, model); err != nil {
				t.Fatal(err)
			}
			base := filepath.Join(dir, c.name+".kld")
			cmd := exec.Command(bin, "-m", model, "-f", textPath, "-c", "2048", "--chunks", "4", "-fa", "off", "-ctk", "f32", "-ctv", "f32",
				"-t", "2", "--kl-divergence-base", base)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("llama-perplexity: %v\n%s", err, out)
			}
			specPath := filepath.Join(dir, c.name+".yaml")
			spec := "name: " + c.name + "\nmodel: {path: " + model + "}\nreference: {name: llama.cpp-b10587, kld_base: " + base + "}\n" +
				"backends:\n  - {name: cpu-ggml, plugin: cpu, options: {numerics: ggml" + c.options + "}}\nbench: {enabled: false}\n"
			if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
				t.Fatal(err)
			}
			a := runEngine(t, loadPlan(t, specPath, nil)).Backends[0].Accuracy
			t.Logf("%s: %d positions, KLD %.3g, same top %.4f", c.name, a.ScoredTokens, *a.KLDMean, *a.SameTopP)
			if a.ScoredTokens < 4*1023 || *a.KLDMean > 1e-6 || *a.SameTopP < 0.998 {
				t.Errorf("%s against llama.cpp b10587's base file: %d positions, KLD %v, same top %v; want KLD <= 1e-6, same top >= 99.8 %%",
					c.name, a.ScoredTokens, *a.KLDMean, *a.SameTopP)
			}
		})
	}
}
