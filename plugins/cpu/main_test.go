package main

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/testkit"
)

// pluginDir holds evalrun-plugin-cpu, built once from this package.
var pluginDir string

func TestMain(m *testing.M) {
	testkit.Main(m, map[string]string{backend.PluginPrefix + "cpu": "./plugins/cpu"}, func(dir string) { pluginDir = dir })
}

func absPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func launch(t *testing.T) *backend.Client {
	t.Helper()
	path, err := backend.FindPlugin("cpu", pluginDir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: path, StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(c.Kill)
	return c
}

func golden(t *testing.T, row, nVocab int) []float32 {
	t.Helper()
	return testkit.F32(t, testkit.Path("testdata", "llamacpp", "logits", "p1.F32.plain.f32"))[row*nVocab : (row+1)*nVocab]
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

func evalRows(t *testing.T, c backend.Backend, req backend.EvalRequest) []backend.Logits {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []backend.Logits
	if err := c.Eval(ctx, req, func(l backend.Logits) error {
		out = append(out, l)
		return nil
	}); err != nil {
		t.Fatalf("Eval(%+v): %v", req, err)
	}
	return out
}

func TestCPUPluginEndToEnd(t *testing.T) {
	c := launch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	info, err := c.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if info.Name != "cpu" || info.Device != "cpu" || info.Version == "" {
		t.Errorf("Describe = %+v", info)
	}

	res, err := c.Load(ctx, backend.LoadRequest{ModelPath: absPath(t, "../../models/stories260K.gguf"), Threads: 2, NCtx: 128})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if res.Model.NVocab != 512 || res.Model.NLayer != 5 || len(res.Plan) != 36 {
		t.Errorf("Load = %+v", res)
	}
	t.Logf("load %.1f ms, warm-up %.2f ms, RSS %.1f MiB, %s",
		float64(res.LoadNS)/1e6, float64(res.WarmupNS)/1e6, float64(res.MemoryBytes)/(1<<20), res.PlanSummary)

	// "Once upon a time": the last row predicts 432, like llama.cpp.
	prompt := []int32{1, 403, 407, 261, 378}
	rows := evalRows(t, c, backend.EvalRequest{Session: "p1", Pos: 0, Tokens: prompt})
	if len(rows) != 5 {
		t.Fatalf("got %d rows, want 5", len(rows))
	}
	worst := 0.0
	for i, r := range rows {
		want := golden(t, i, 512)
		for j := range want {
			worst = math.Max(worst, math.Abs(float64(r.Values[j]-want[j])))
		}
		if r.Index != i || r.Pos != i || argmax(r.Values) != argmax(want) {
			t.Errorf("row %d: index %d pos %d argmax %d, llama.cpp argmax %d", i, r.Index, r.Pos, argmax(r.Values), argmax(want))
		}
	}
	if a := argmax(rows[4].Values); a != 432 {
		t.Errorf("last row argmax %d, want 432", a)
	}
	if worst > 1e-3 {
		t.Errorf("max |logit diff| to llama.cpp (F32, plain) %.3g, want <= 1e-3", worst)
	}
	t.Logf("max |logit diff| to llama.cpp over 5 rows: %.3g", worst)

	// Continue the session with the predicted token: the new row is
	// position 5 and matches a fresh one-call evaluation of all six tokens.
	next := evalRows(t, c, backend.EvalRequest{Session: "p1", Pos: -1, Tokens: []int32{432}})
	if len(next) != 1 || next[0].Index != 0 || next[0].Pos != 5 {
		t.Fatalf("continue: %d rows, first %+v", len(next), next[0])
	}
	fresh := evalRows(t, c, backend.EvalRequest{Session: "fresh", Pos: 0, Tokens: append(append([]int32(nil), prompt...), 432), LogitsFrom: 5})
	d := 0.0
	for j := range fresh[0].Values {
		d = math.Max(d, math.Abs(float64(next[0].Values[j]-fresh[0].Values[j])))
	}
	if d > 1e-4 || argmax(next[0].Values) != argmax(fresh[0].Values) {
		t.Errorf("continued row differs from a one-call evaluation by %.3g (argmax %d vs %d)", d, argmax(next[0].Values), argmax(fresh[0].Values))
	}
	// Truncating back to 5 and feeding 432 again reproduces the row exactly.
	again := evalRows(t, c, backend.EvalRequest{Session: "p1", Pos: 5, Tokens: []int32{432}})
	if !reflect.DeepEqual(again[0].Values, next[0].Values) {
		t.Error("truncate + re-feed did not reproduce the continued row")
	}

	bench, err := c.Bench(ctx, backend.BenchRequest{NPrompt: 8, NGen: 4, Reps: 3, Warmup: true, Seed: 1, NBatch: 8})
	if err != nil {
		t.Fatalf("Bench: %v", err)
	}
	if len(bench.SamplesNS) != 3 || bench.NPrompt != 8 || bench.NGen != 4 || bench.WarmupNS <= 0 {
		t.Errorf("Bench = %+v", bench)
	}
	t.Logf("bench pp8+tg4: samples %v ns", bench.SamplesNS)

	_, err = c.Load(ctx, backend.LoadRequest{ModelPath: absPath(t, "../../models/stories260K.gguf"), Options: map[string]any{"kernels": "all"}})
	if !errors.Is(err, backend.ErrInvalidArgument) || status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), `unknown option "kernels"`) || !strings.Contains(err.Error(), "numerics") {
		t.Errorf("Load with unknown option: err = %v (code %v); want InvalidArgument naming it and listing numerics", err, status.Code(err))
	}

	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	err = c.Eval(ctx, backend.EvalRequest{Tokens: []int32{1}}, func(backend.Logits) error { return nil })
	if !errors.Is(err, backend.ErrNotLoaded) || status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Eval after Close: err = %v, want FailedPrecondition", err)
	}
}

func TestCPUPluginGGMLNumerics(t *testing.T) {
	c := launch(t)
	ctx := context.Background()
	model := absPath(t, "../../models/stories260K-q8_0.gguf")
	lastRow := func(numerics string) []float32 {
		if _, err := c.Load(ctx, backend.LoadRequest{ModelPath: model, Options: map[string]any{"numerics": numerics}}); err != nil {
			t.Fatalf("Load numerics=%s: %v", numerics, err)
		}
		return evalRows(t, c, backend.EvalRequest{Pos: 0, Tokens: []int32{1, 403, 407, 261, 378}, LogitsFrom: 4})[0].Values
	}
	exact, ggml := lastRow("exact"), lastRow("ggml")
	if reflect.DeepEqual(exact, ggml) {
		t.Error("numerics=ggml and exact gave identical Q8_0 logits")
	}
	if argmax(exact) != 432 || argmax(ggml) != 432 {
		t.Errorf("argmax exact %d, ggml %d; want 432", argmax(exact), argmax(ggml))
	}
	if _, err := c.Load(ctx, backend.LoadRequest{ModelPath: model, Options: map[string]any{"numerics": "fast"}}); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("numerics=fast: err = %v, want InvalidArgument", err)
	}
}
