package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/internal/toolcmd"
)

// tool runs one of the plugin's commands in this process, as main does.
func tool(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmds := tools()
	for _, c := range cmds {
		c.SetOut(&out)
		c.SetErr(&errb)
	}
	code, ran := toolcmd.Run(args, cmds...)
	if !ran {
		t.Fatalf("%q is not one of the plugin's commands", args)
	}
	return code, out.String(), errb.String()
}

func model(name string) string { return testkit.Path("models", name) }

// TestEngineCommandsMatchLlamaCpp checks the engine commands as a script
// uses them against llama.cpp's goldens.
func TestEngineCommandsMatchLlamaCpp(t *testing.T) {
	g := testkit.ReadGolden(t, "logits/p3.F32.plain.json")
	code, stdout, stderr := tool(t, "tokenize", "--model", model("stories260K.gguf"),
		"The little girl walked into the forest with her basket. She wanted to pick berries for her mother. Soon she found a bush full of red berries. She picked one and ate it. It was sweet! Then she heard a small sound behind the bush.")
	var ids []int32
	if err := json.Unmarshal([]byte(stdout), &ids); code != 0 || err != nil || fmt.Sprint(ids) != fmt.Sprint(g.TokenIDs) {
		t.Fatalf("tokenize: exit %d, %v %q, want %v\n%s", code, err, stdout, g.TokenIDs, stderr)
	}

	out := filepath.Join(t.TempDir(), "p3.f32")
	code, _, stderr = tool(t, "logits", "--model", model("stories260K.gguf"), "--tokens", strings.Trim(strings.ReplaceAll(fmt.Sprint(g.TokenIDs), " ", ","), "[]"), "--out", out, "--threads", "2")
	if code != 0 {
		t.Fatalf("logits: %d %s", code, stderr)
	}
	ours, want := testkit.F32(t, out), testkit.F32(t, testkit.Path("testdata", "llamacpp", "logits", "p3.F32.plain.f32"))
	if len(ours) != len(want) {
		t.Fatalf("logits: %d values, want %d", len(ours), len(want))
	}
	maxd := 0.0
	for i := range ours {
		maxd = math.Max(maxd, math.Abs(float64(ours[i]-want[i])))
	}
	t.Logf("evalrun logits p3 F32: max |Δ| vs llama.cpp %.3g", maxd)
	if maxd > 1e-4 {
		t.Fatalf("logits: max |Δ| %g > 1e-4", maxd)
	}
	var meta map[string]any
	data, _ := os.ReadFile(out + ".json")
	if err := json.Unmarshal(data, &meta); err != nil || meta["n_vocab"].(float64) != 512 || meta["model_sha256"] != "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d" {
		t.Fatalf("logits sidecar: %v %v", err, meta)
	}

	for _, v := range []string{"F32", "F16", "Q8_0"} {
		gen := testkit.ReadGolden(t, "generate/p1."+v+".plain.gen.json")
		file := map[string]string{"F32": "stories260K.gguf", "F16": "stories260K-f16.gguf", "Q8_0": "stories260K-q8_0.gguf"}[v]
		code, stdout, stderr = tool(t, "generate", "--model", model(file), "--prompt", "Once upon a time", "-n", "64", "--json", "--numerics", "ggml")
		var res struct {
			PromptIDs    []int32 `json:"prompt_ids"`
			GeneratedIDs []int32 `json:"generated_ids"`
			Text         string  `json:"text"`
		}
		if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil {
			t.Fatalf("generate %s: exit %d, %v %q %s", v, code, err, stdout, stderr)
		}
		if fmt.Sprint(res.PromptIDs) != fmt.Sprint(gen.PromptIDs) || fmt.Sprint(res.GeneratedIDs) != fmt.Sprint(gen.GeneratedIDs) {
			t.Fatalf("generate %s: %v, llama.cpp %v", v, res.GeneratedIDs, gen.GeneratedIDs)
		}
		if !strings.HasPrefix(res.Text, ", there was a little girl named Lily") {
			t.Fatalf("generate %s text %q", v, res.Text)
		}
	}
}

// TestInspect: the text and JSON forms name every tensor and count the
// parameters as gguf does; vocabularies are shortened.
func TestInspect(t *testing.T) {
	f, err := gguf.Open(model("stories260K-q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code, stdout, stderr := tool(t, "inspect", model("stories260K-q8_0.gguf"))
	head := fmt.Sprintf("%s: GGUF v3, alignment 32, %d metadata keys, %d tensors, %d parameters\n", model("stories260K-q8_0.gguf"), len(f.KVs), len(f.Tensors), f.NParams())
	if code != 0 || !strings.HasPrefix(stdout, head) || !strings.Contains(stdout, "tokenizer.ggml.tokens                    [512 × string]\n") ||
		!strings.Contains(stdout, "  blk.0.ffn_up.weight              Q8_0   [64 172]\n") || !strings.HasSuffix(stdout, "\ntensor types: F16×5 F32×11 Q8_0×32\n") {
		t.Errorf("inspect: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = tool(t, "inspect", "--json", model("stories260K-q8_0.gguf"))
	var j struct {
		NParams     uint64         `json:"n_params"`
		Tensors     []any          `json:"tensors"`
		TensorTypes map[string]int `json:"tensor_types"`
		Metadata    map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(stdout), &j); code != 0 || err != nil || j.NParams != f.NParams() || len(j.Tensors) != len(f.Tensors) ||
		j.TensorTypes["Q8_0"] != 32 || j.Metadata["llama.block_count"] != 5.0 {
		t.Errorf("inspect --json: exit %d, %v, %+v", code, err, j)
	}
}

// TestToolErrors: bad input exits 2 naming what is wrong, and leaves no file.
func TestToolErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", testkit.Path("README.md")}, "README.md"},
		{[]string{"tokenize", "--model", testkit.Path("README.md"), "x"}, "README.md"},
		{[]string{"generate", "--model", model("stories260K.gguf"), "--prompt", "x", "--temp", "-1"}, "--temp must be ≥ 0"},
		{[]string{"generate", "--model", model("stories260K.gguf"), "--prompt", "x", "--threads", "0"}, "--threads: 1 to"},
		{[]string{"generate", "--model", model("stories260K.gguf"), "--prompt", "x", "--numerics", "fast"}, "--numerics:"},
		{[]string{"logits", "--model", model("stories260K.gguf"), "--tokens", "1,512", "--out", filepath.Join(dir, "l")}, `--tokens: "512" is not a token id in 0..511`},
		{[]string{"logits", "--model", model("stories260K.gguf"), "--out", filepath.Join(dir, "l")}, "prompt tokens"},
		{[]string{"logits", "--model", model("stories260K.gguf"), "--tokens", "1", "--out", dir}, dir + ": is a directory"},
		{[]string{"synth", "--type", "q9_9", "--out", filepath.Join(dir, "s.gguf")}, "--type:"},
		{[]string{"synth", "--n-embd", "100", "--n-head", "3", "--out", filepath.Join(dir, "s.gguf")}, "synth"},
		{[]string{"generate", "--bogus"}, "unknown flag: --bogus (see 'evalrun generate --help')"},
	} {
		code, _, stderr := tool(t, c.args...)
		if code != 2 || !strings.HasPrefix(stderr, "evalrun: ") || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("bad input left %v", left)
	}

	// The sidecar cannot be written: the logits are not written either.
	side := t.TempDir()
	os.Mkdir(filepath.Join(side, "l.json"), 0o755)
	code, _, stderr := tool(t, "logits", "--model", model("stories260K.gguf"), "--tokens", "1", "--out", filepath.Join(side, "l"))
	if left, _ := os.ReadDir(side); code != 2 || !strings.Contains(stderr, "l.json: is a directory") || len(left) != 1 {
		t.Errorf("logits with an unwritable sidecar: exit %d, stderr %q, left %v; want 2 and only the directory in the way", code, stderr, left)
	}
}

// TestSynth writes a small model that the engine's commands then read.
func TestSynth(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.gguf")
	code, stdout, stderr := tool(t, "synth", "--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--n-vocab", "300", "--type", "q8_0", "--out", out)
	if code != 0 || stdout != "wrote "+out+"\n" {
		t.Fatalf("synth: exit %d %q %s", code, stdout, stderr)
	}
	code, stdout, stderr = tool(t, "inspect", "--json", out)
	var j struct {
		Metadata    map[string]any `json:"metadata"`
		TensorTypes map[string]int `json:"tensor_types"`
	}
	if err := json.Unmarshal([]byte(stdout), &j); code != 0 || err != nil || j.Metadata["llama.block_count"] != 2.0 ||
		j.Metadata["llama.attention.head_count_kv"] != 2.0 || j.TensorTypes["Q8_0"] != 16 {
		t.Fatalf("inspect of the synthetic model: exit %d %v %+v %s", code, err, j, stderr)
	}
	if code, stdout, stderr = tool(t, "generate", "--model", out, "--prompt", "a", "-n", "3", "--json"); code != 0 || !strings.Contains(stdout, `"generated_ids":[`) {
		t.Fatalf("generate on the synthetic model: exit %d %q %s", code, stdout, stderr)
	}
}

// TestGenerateStopsWhenInterrupted: generate checks its context between
// tokens (toolcmd.Run cancels it on SIGINT/SIGTERM): a long generation
// stops instead of running out its grace.
func TestGenerateStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := newGenerateCmd()
	cmd.SilenceUsage, cmd.SilenceErrors = true, true // as toolcmd.Run's root has it
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--model", model("stories260K.gguf"), "--prompt", "Once", "-n", "200"})
	if err := cmd.ExecuteContext(ctx); !errors.Is(err, context.Canceled) || out.String() != "Once\n" {
		t.Errorf("generate with its context ended: %v, printed %q; want %v after the prompt and a newline", err, out.String(), context.Canceled)
	}
}
