package backend_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/backend/backendtest"
)

// serveInProcess runs b through backend.Serve in go-plugin's test mode and
// connects a host Client to it, so both adapters and Serve's gRPC server
// settings are exercised without building a binary.
func serveInProcess(t testing.TB, b backend.Backend) *backend.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go backend.Serve(b, backend.WithLogger(hclog.NewNullLogger()), backend.WithTestConfig(&plugin.ServeTestConfig{
		Context:          ctx,
		ReattachConfigCh: reattach,
		CloseCh:          closed,
	}))
	var rc *plugin.ReattachConfig
	select {
	case rc = <-reattach:
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("in-process plugin did not start")
	}
	c, err := backend.Launch(context.Background(), backend.LaunchConfig{Reattach: rc})
	if err != nil {
		cancel()
		t.Fatalf("Launch(reattach): %v", err)
	}
	t.Cleanup(func() {
		c.Kill()
		cancel()
		<-closed
	})
	return c
}

func TestDescribeLoadBenchClose(t *testing.T) {
	var gotLoad backend.LoadRequest
	c := serveInProcess(t, &backendtest.Fake{OnLoad: func(req backend.LoadRequest) { gotLoad = req }})
	ctx := context.Background()

	info, err := c.Describe(ctx)
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if !reflect.DeepEqual(info, backendtest.Info) {
		t.Errorf("Describe = %+v, want %+v", info, backendtest.Info)
	}

	loadReq := backend.LoadRequest{ModelPath: "m.gguf", Threads: 3, NCtx: 64, Options: map[string]any{"vocab": float64(5), "print": false}, VocabDigest: "ab12"}
	res, err := c.Load(ctx, loadReq)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(gotLoad, loadReq) {
		t.Errorf("the plugin got %+v, want %+v", gotLoad, loadReq)
	}
	want := backend.LoadResult{
		Model: backend.ModelInfo{Arch: "fake", NVocab: 5, NParams: 1234, NCtxTrain: 64, NLayer: 2, NEmbd: 16, FileType: "F32", SizeBytes: 4096},
		Plan: []backend.PlanEntry{
			{Op: "Qcur-0", Device: "npu", Shape: "1×16×16"},
			{Op: "result_output", Device: "cpu", Shape: "1×16×8", Reason: "not in kernel list"},
		},
		PlanSummary: "1 of 2 matmuls on the NPU",
		LoadNS:      11, WarmupNS: 22, MemoryBytes: 3000,
	}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("Load =\n%+v\nwant\n%+v", res, want)
	}

	bench, err := c.Bench(ctx, backend.BenchRequest{NPrompt: 16, NGen: 4, Reps: 3, Warmup: true, Seed: 1, NBatch: 8})
	if err != nil {
		t.Fatalf("Bench: %v", err)
	}
	wantBench := backend.BenchResult{NPrompt: 16, NGen: 4, SamplesNS: []int64{1, 2, 3}, WarmupNS: 7}
	if !reflect.DeepEqual(bench, wantBench) {
		t.Errorf("Bench = %+v, want %+v", bench, wantBench)
	}

	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	err = c.Eval(ctx, backend.EvalRequest{Tokens: []int32{1}}, func(backend.Logits) error { return nil })
	if !errors.Is(err, backend.ErrNotLoaded) {
		t.Errorf("Eval after Close: err = %v, want ErrNotLoaded", err)
	}
}

// collect runs Eval and returns the streamed rows (copied).
func collect(t *testing.T, b backend.Backend, req backend.EvalRequest) ([]backend.Logits, error) {
	t.Helper()
	var rows []backend.Logits
	err := b.Eval(context.Background(), req, func(l backend.Logits) error {
		l.Values = append([]float32(nil), l.Values...)
		rows = append(rows, l)
		return nil
	})
	return rows, err
}

func TestEvalStreamsLargeRows(t *testing.T) {
	c := serveInProcess(t, &backendtest.Fake{})
	const vocab = 200_000 // 800 KB per row, 2.4 MB per call
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m", Options: map[string]any{"vocab": vocab}}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	tokens := []int32{11, 22, 33}
	rows, err := collect(t, c, backend.EvalRequest{Session: "a", Pos: 0, Tokens: tokens})
	if err != nil {
		t.Fatalf("Eval: %v", err)
	}
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want 3", len(rows))
	}
	for i, r := range rows {
		if r.Index != i || r.Pos != i {
			t.Errorf("row %d: index %d pos %d", i, r.Index, r.Pos)
		}
		if msg := backendtest.CheckRow(r.Values, i, tokens[i], len(tokens), vocab); msg != "" {
			t.Errorf("row %d: %s", i, msg)
		}
	}

	// Continue the session: positions follow on, only rows from LogitsFrom.
	rows, err = collect(t, c, backend.EvalRequest{Session: "a", Pos: -1, Tokens: []int32{44, 55}, LogitsFrom: 1})
	if err != nil {
		t.Fatalf("Eval continue: %v", err)
	}
	if len(rows) != 1 || rows[0].Index != 1 || rows[0].Pos != 4 {
		t.Fatalf("continue: got %d rows, first %+v; want one row index 1 pos 4", len(rows), rows[0])
	}
	if msg := backendtest.CheckRow(rows[0].Values, 4, 55, 2, vocab); msg != "" {
		t.Errorf("continue row: %s", msg)
	}

	// LogitsFrom = len(Tokens) asks for no rows at all.
	rows, err = collect(t, c, backend.EvalRequest{Session: "b", Pos: 0, Tokens: []int32{1, 2}, LogitsFrom: 2})
	if err != nil || len(rows) != 0 {
		t.Errorf("LogitsFrom=len: %d rows, err %v; want none", len(rows), err)
	}
}

func TestEvalIntoUsesTheCallersRows(t *testing.T) {
	c := serveInProcess(t, &backendtest.Fake{})
	const vocab = 1000
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m", Options: map[string]any{"vocab": vocab}}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	pool := [][]float32{make([]float32, vocab), make([]float32, vocab)}
	next := 0
	var lastCompute int64
	tokens := []int32{5, 6, 7, 8}
	err := c.EvalInto(context.Background(), backend.EvalRequest{Session: "s", Pos: 0, Tokens: tokens},
		func(n int) []float32 { r := pool[next%2][:n]; next++; return r },
		func(l backend.Logits) error {
			if &l.Values[0] != &pool[l.Index%2][0] {
				t.Errorf("row %d was not decoded into the caller's buffer", l.Index)
			}
			if msg := backendtest.CheckRow(l.Values, l.Index, tokens[l.Index], len(tokens), vocab); msg != "" {
				t.Errorf("row %d: %s", l.Index, msg)
			}
			if l.ComputeNS <= 0 || l.ComputeNS < lastCompute {
				t.Errorf("row %d: compute %d ns after %d: want a growing positive total", l.Index, l.ComputeNS, lastCompute)
			}
			lastCompute = l.ComputeNS
			return nil
		})
	if err != nil || next != len(tokens) {
		t.Fatalf("EvalInto: %v, %d rows", err, next)
	}
}

func TestEvalRequestAboveGRPCDefaultLimit(t *testing.T) {
	c := serveInProcess(t, &backendtest.Fake{})
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m"}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	// 2M tokens that each take 3 bytes as varints: about 6 MB, above gRPC's
	// default 4 MiB receive limit that a plugin keeps unless Serve raises it.
	const n = 2 << 20
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(100_000 + i%1000)
	}
	rows, err := collect(t, c, backend.EvalRequest{Session: "big", Pos: 0, Tokens: tokens, LogitsFrom: n - 1})
	if err != nil {
		t.Fatalf("Eval of %d tokens: %v", n, err)
	}
	if len(rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(rows))
	}
	if msg := backendtest.CheckRow(rows[0].Values, n-1, tokens[n-1], n, backendtest.DefaultVocab); msg != "" {
		t.Errorf("last row: %s", msg)
	}
}

func TestErrorsKeepCodeAndText(t *testing.T) {
	c := serveInProcess(t, &backendtest.Fake{})
	ctx := context.Background()

	err := c.Eval(ctx, backend.EvalRequest{Tokens: []int32{1}}, func(backend.Logits) error { return nil })
	if !errors.Is(err, backend.ErrNotLoaded) || status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Eval before Load: err = %v (code %v), want ErrNotLoaded / FailedPrecondition", err, status.Code(err))
	}

	_, err = c.Load(ctx, backend.LoadRequest{ModelPath: "m", Options: map[string]any{"bogus": 1}})
	if !errors.Is(err, backend.ErrInvalidArgument) || status.Code(err) != codes.InvalidArgument {
		t.Errorf("Load with unknown option: err = %v (code %v), want ErrInvalidArgument", err, status.Code(err))
	}
	if err != nil && err.Error() != `unknown option "bogus" (valid options: print, vocab)` {
		t.Errorf("Load with unknown option: message %q is not the plugin's text", err.Error())
	}

	if _, err := c.Load(ctx, backend.LoadRequest{ModelPath: "m"}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	err = c.Eval(ctx, backend.EvalRequest{Session: "s", Pos: 5, Tokens: []int32{1}}, func(backend.Logits) error { return nil })
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), `pos 5 outside 0..0 of session "s"`) {
		t.Errorf("Eval with bad pos: err = %v", err)
	}
	_, err = c.Bench(ctx, backend.BenchRequest{Reps: 0})
	if !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Bench with 0 reps: err = %v, want ErrInvalidArgument", err)
	}

	// An error from emit stops the stream and comes back unchanged.
	stop := errors.New("host has seen enough")
	calls := 0
	err = c.Eval(ctx, backend.EvalRequest{Session: "t", Pos: 0, Tokens: []int32{1, 2, 3, 4}}, func(backend.Logits) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Errorf("emit error: err = %v after %d calls, want %v after 1", err, calls, stop)
	}

	// The caller's deadline is reported as context.DeadlineExceeded.
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if _, err := c.Describe(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Describe past deadline: err = %v, want DeadlineExceeded", err)
	}
}

func TestFindPlugin(t *testing.T) {
	empty, dir := t.TempDir(), t.TempDir()
	bin := dir + "/evalrun-plugin-demo"
	if err := writeFile(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := backend.FindPlugin("demo", empty, dir)
	if err != nil || got != bin {
		t.Errorf("FindPlugin(demo) = %q, %v; want %q", got, err, bin)
	}

	_, err = backend.FindPlugin("missing", empty, dir)
	if err == nil || !strings.Contains(err.Error(), "evalrun-plugin-missing") ||
		!strings.Contains(err.Error(), empty) || !strings.Contains(err.Error(), dir) {
		t.Errorf("FindPlugin(missing): err = %v; want it to name the file and every directory searched", err)
	}

	if err := writeFile(dir+"/evalrun-plugin-noexec", 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := backend.FindPlugin("noexec", dir); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("FindPlugin(noexec): err = %v, want 'not executable'", err)
	}
	if _, err := backend.FindPlugin("../x", dir); err == nil {
		t.Error("FindPlugin accepted a path to nothing")
	}
	// A path (the caller allowed it) is used as is, made absolute.
	if got, err := backend.FindPlugin(bin); err != nil || got != bin {
		t.Errorf("FindPlugin(path) = %q, %v; want %q", got, err, bin)
	}
	if _, err := backend.FindPlugin(dir + "/"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FindPlugin(directory): err = %v", err)
	}
}

func TestValidateCrossesTheBoundary(t *testing.T) {
	var got backend.LoadRequest
	c := serveInProcess(t, &backendtest.Fake{OnValidate: func(req backend.LoadRequest) []string {
		got = req
		return []string{"careful"}
	}})
	ctx := context.Background()
	req := backend.LoadRequest{ModelPath: "m", Threads: 2, Options: map[string]any{"vocab": 4}, BaseDir: "/spec/dir"}
	warnings, err := c.Validate(ctx, req)
	if err != nil || !reflect.DeepEqual(warnings, []string{"careful"}) {
		t.Fatalf("Validate: %v %v", warnings, err)
	}
	if got.BaseDir != "/spec/dir" || got.ModelPath != "m" || got.Options["vocab"] != float64(4) {
		t.Errorf("the plugin saw %+v", got)
	}
	_, err = c.Validate(ctx, backend.LoadRequest{Options: map[string]any{"typo_opt": 1}})
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), `unknown option "typo_opt"`) {
		t.Errorf("bad option: %v", err)
	}
	// A plugin without Validate says so, and stays usable.
	old := serveInProcess(t, struct{ backend.Backend }{&backendtest.Fake{}})
	if _, err := old.Validate(ctx, req); !errors.Is(err, backend.ErrUnsupported) {
		t.Errorf("plugin without Validate: %v", err)
	}
	if _, err := old.Describe(ctx); err != nil {
		t.Errorf("Describe after Validate: %v", err)
	}
}

// benchSpy keeps the BenchRequest the plugin received; with ignoreDepth it
// measures as a plugin built before n_depth would, at depth 0.
type benchSpy struct {
	*backendtest.Fake
	got         backend.BenchRequest
	ignoreDepth bool
}

func (b *benchSpy) Bench(ctx context.Context, req backend.BenchRequest) (backend.BenchResult, error) {
	b.got = req
	if b.ignoreDepth {
		req.NDepth = 0
	}
	return b.Fake.Bench(ctx, req)
}

// n_depth reaches the plugin and comes back; a plugin that measured at
// another depth (one that predates n_depth) is an error, not a result.
func TestBenchDepth(t *testing.T) {
	ctx := context.Background()
	req := backend.BenchRequest{NGen: 4, Reps: 2, NDepth: 512}
	spy := &benchSpy{Fake: &backendtest.Fake{}}
	c := serveInProcess(t, spy)
	if _, err := c.Load(ctx, backend.LoadRequest{ModelPath: "m.gguf"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Bench(ctx, req)
	if err != nil || res.NDepth != 512 || spy.got != req {
		t.Fatalf("Bench: %+v, %v; the plugin got %+v", res, err, spy.got)
	}

	old := &benchSpy{Fake: &backendtest.Fake{}, ignoreDepth: true}
	c = serveInProcess(t, old)
	if _, err := c.Load(ctx, backend.LoadRequest{ModelPath: "m.gguf"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bench(ctx, req); !errors.Is(err, backend.ErrUnsupported) || !strings.Contains(err.Error(), "n_depth 512") {
		t.Errorf("a plugin that ignored n_depth: %v, want ErrUnsupported naming n_depth 512", err)
	}
}
