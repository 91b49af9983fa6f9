package main

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/plugins/enginebackend"
	"github.com/evalrun/evalrun/plugins/internal/faults"
)

var pluginPath, binDir string

func model(variant string) string {
	p, _ := filepath.Abs("../../models/stories260K" + variant + ".gguf")
	return p
}

func TestMain(m *testing.M) {
	name := backend.PluginPrefix + "hexagon"
	testkit.Main(m, map[string]string{name: "./plugins/hexagon", "evalrun": "./cmd/evalrun", backend.PluginPrefix + "cpu": "./plugins/cpu"},
		func(dir string) { pluginPath, binDir = filepath.Join(dir, name), dir })
}

var prompt = []int32{1, 403, 407, 261, 378, 430, 312, 410}

func load(t *testing.T, variant string, opts map[string]any) (*enginebackend.Backend, backend.LoadResult, error) {
	t.Helper()
	b := enginebackend.New(config(hclog.NewNullLogger()))
	t.Cleanup(func() { b.Close(context.Background()) })
	res, err := b.Load(context.Background(), backend.LoadRequest{ModelPath: model(variant), Threads: 1, Options: opts})
	return b, res, err
}

// TestLoadPlanAndEval: the Q4_0 model on two sessions: every matmul on the
// HTP, plan entries name the session, logits finite and near the CPU's.
func TestLoadPlanAndEval(t *testing.T) {
	b, res, err := load(t, "-q4_0", map[string]any{"sessions": 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.PlanSummary != "36 of 36 matmuls on the HTP, 2 session(s) (HTP0: layers 0-2, 21 MUL_MAT; HTP1: layers 3-4 + output, 15 MUL_MAT)" {
		t.Errorf("summary %q", res.PlanSummary)
	}
	if res.Plan[0].Device != "HTP0" || res.Plan[35].Op != "result_output" || res.Plan[35].Device != "HTP1" || res.Plan[21].Device != "HTP1" {
		t.Errorf("plan %+v ... %+v", res.Plan[0], res.Plan[35])
	}
	if info, _ := b.Describe(context.Background()); info.Device != "hexagon-htp (sim)" || !info.Simulated() {
		t.Errorf("device %q, capabilities %v: want the simulated capability", info.Device, info.Capabilities)
	}
	n := 0
	err = b.Eval(context.Background(), backend.EvalRequest{Session: "s", Tokens: prompt}, func(l backend.Logits) error {
		for _, v := range l.Values {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("row %d: %g", l.Index, v)
			}
		}
		n++
		return nil
	})
	if err != nil || n != len(prompt) {
		t.Fatalf("Eval: %d rows, %v", n, err)
	}
}

// TestOptionErrors: bad options are refused at Load naming the option, as
// invalid arguments (the host's exit 2).
func TestOptionErrors(t *testing.T) {
	for _, c := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{"sessions": 0}, `option "sessions": 0 outside 1..16`},
		{map[string]any{"sessions": 17}, `option "sessions": 17 outside 1..16`},
		{map[string]any{"sessions": "two"}, `option "sessions": want an integer, got "two"`},
		{map[string]any{"sessions": 6}, `option "sessions": 6 exceeds the model's 5 layers`},
		{map[string]any{"ops": "attention"}, `option "ops": "attention" unknown (want matmul or layer)`},
		{map[string]any{"faults": map[string]any{"nan_after": -1}}, `option "faults.nan_after": -1 must be >= 0`},
		{map[string]any{"faults": map[string]any{"bitflip_bit": 3}}, `option "faults.bitflip_bit" needs faults.bitflip_after`},
		{map[string]any{"faults": map[string]any{"bitflip_after": 0, "bitflip_bit": 32}}, `option "faults.bitflip_bit": 32 outside 0..31`},
		{map[string]any{"cores": 3}, `unknown option "cores"`},
	} {
		_, _, err := load(t, "-q8_0", c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%v: %v, want an invalid argument containing %q", c.opts, err, c.want)
		}
	}
}

// TestFaultCrashThroughThePlugin: faults: {crash_after: 0} kills the plugin
// process at the first HTP matmul after Load; the host sees it exit.
func TestFaultCrashThroughThePlugin(t *testing.T) {
	c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: pluginPath, StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: model("-q8_0"), Threads: 1, Options: map[string]any{"faults": map[string]any{"crash_after": 0}}}); err != nil {
		t.Fatalf("Load (the warm-up runs before the faults are armed): %v", err)
	}
	err = c.Eval(context.Background(), backend.EvalRequest{Session: "s", Tokens: prompt}, func(backend.Logits) error { return nil })
	if err == nil {
		t.Fatal("Eval succeeded on a crashed device")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !c.Exited() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if code := c.ExitCode(); !c.Exited() || code != faults.CrashExitCode {
		t.Errorf("plugin exited %v with %d, want %d", c.Exited(), code, faults.CrashExitCode)
	}
}

// TestRunRefusesBadOptions: through evalrun run, a bad sessions, kv_cache or
// faults value is bad input (exit 2) reported at the option's line of the
// spec, a nested one by its full name.
func TestRunRefusesBadOptions(t *testing.T) {
	dataset, _ := filepath.Abs("../../datasets/stories.jsonl")
	for _, c := range []struct{ options, want string }{
		{"{sessions: 9}", `spec.yaml:9: backends[0].options.sessions: htp refused`},
		{"{kv_cache: {key: fp8_e4m3}}", `spec.yaml:9: backends[0].options.kv_cache: htp refused its options: option "kv_cache": key: "fp8_e4m3" unknown`},
		{"{faults: {nan_after: -1}}", `spec.yaml:9: backends[0].options.faults.nan_after: htp refused its options: option "faults.nan_after": -1 must be >= 0`},
		{"{faults: {crash_after_runs: 1}}", `spec.yaml:9: backends[0].options.faults.crash_after_runs: htp refused its options: unknown option "faults.crash_after_runs" (valid options in "faults": bitflip_after, bitflip_bit, crash_after, hang_after, inf_after, nan_after)`},
	} {
		dir := t.TempDir()
		spec := "name: bad\nmodel: {path: " + model("-q8_0") + "}\ndatasets:\n  - {name: s, path: " + dataset + ", mode: score, n_ctx: 64}\n" +
			"reference: {name: ref, plugin: cpu}\nbackends:\n  - name: htp\n    plugin: hexagon\n" +
			"    options: " + c.options + "\nbench: {enabled: false}\noutput: {dir: " + dir + "}\n"
		path := filepath.Join(dir, "spec.yaml")
		if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(binDir, "evalrun"), "run", path, "--out", filepath.Join(dir, "out"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitcode.BadInput || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: exit %v, want %d with %q; output:\n%s", c.options, err, exitcode.BadInput, c.want, out)
		}
	}
}
