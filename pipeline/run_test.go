package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// testPlan builds a plan over the fakes without a model file: one score
// dataset of nTok tokens in chunks of nCtx and a few generate prompts.
func testPlan(t *testing.T, nVocab, nTok, nCtx, nGen int, cands ...spec.Backend) *plan.Plan {
	t.Helper()
	stream := make([]int32, nTok)
	for i := range stream {
		stream[i] = int32((i*7919 + 13) % nVocab)
	}
	s := &spec.Spec{
		Name:      "test",
		Reference: spec.Reference{Backend: spec.Backend{Name: "ref", Plugin: "fake", Threads: 1, Key: "reference"}},
		Bench:     spec.Bench{Enabled: true, NPrompt: 8, NGen: 4, Reps: 3},
		Output:    spec.Output{Dir: t.TempDir(), Formats: []string{"json", "jsonl", "md"}},
		Timeouts:  spec.Timeouts{Start: 5 * time.Second, Load: 5 * time.Second, Eval: 5 * time.Second, Bench: 5 * time.Second},
	}
	for i := range cands {
		cands[i].Key = fmt.Sprintf("backends[%d]", i)
	}
	s.Candidates = cands
	p := &plan.Plan{
		Spec:      s,
		Model:     summary.ModelSummary{Path: "fake.gguf", Arch: "fake", NVocab: nVocab},
		NCtxTrain: 1 << 20,
		BOS:       1,
		Datasets: []plan.Dataset{
			{Dataset: spec.Dataset{Name: "score", Mode: spec.ModeScore, NCtx: nCtx}, Records: 1, Tokens: nTok, Stream: stream},
		},
	}
	if nGen > 0 {
		d := plan.Dataset{Dataset: spec.Dataset{Name: "gen", Mode: spec.ModeGenerate, MaxNewTokens: nGen}, Records: 3}
		for i := range 3 {
			d.Prompts = append(d.Prompts, plan.Prompt{Dataset: "gen", ID: string(rune('a' + i)), Tokens: []int32{1, int32(10 + i), int32(20 + i)}, MaxNew: nGen})
		}
		p.Datasets = append(p.Datasets, d)
	}
	return p
}

func ptr(v float64) *float64 { return &v }

func runFakes(t *testing.T, p *plan.Plan, fakes map[string]*fakeBackend) (*resultsdir.Run, string) {
	t.Helper()
	var errb bytes.Buffer
	res, err := Run(context.Background(), p, Options{OutDir: filepath.Join(p.Spec.Output.Dir, "run"), Stderr: &errb, Launch: fakeLauncher(fakes), Version: "test"})
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, errb.String())
	}
	return res, errb.String()
}

func readSummary(t *testing.T, dir string) *summary.Summary {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if s.Schema != summary.SchemaVersion {
		t.Fatalf("schema %q", s.Schema)
	}
	return &s
}

func TestRunIdenticalBackendsPass(t *testing.T) {
	p := testPlan(t, 64, 256, 32, 5, spec.Backend{Name: "same", Plugin: "fake", Gates: spec.Gates{KLDMeanMax: ptr(0), SameTopPMin: ptr(1), MaxAbsDiffMax: ptr(0)}})
	ref, same := newFake(64), newFake(64)
	res, out := runFakes(t, p, map[string]*fakeBackend{"ref": ref, "same": same})
	s := readSummary(t, res.Dir)
	if s.Verdict.ExitCode != exitcode.Pass || s.Verdict.Status != summary.VerdictPass {
		t.Fatalf("verdict %+v\n%s", s.Verdict, out)
	}
	b := s.Backends[0]
	a := b.Accuracy
	// 8 chunks × (32-1-16) scored rows + 3 prompts × 5 generated steps.
	if a.Tokens != 8*15+15 || a.ScoredTokens != 8*15+15 || !a.Complete {
		t.Fatalf("tokens %d scored %d complete %v", a.Tokens, a.ScoredTokens, a.Complete)
	}
	if *a.KLDMean != 0 || *a.SameTopP != 1 || *a.MaxAbsDiff != 0 || *a.NMSE != 0 || *a.GreedyMatch != 1 || *a.FirstDivergenceMean != 5 {
		t.Fatalf("identical backends: %+v", a)
	}
	if *a.PPL != *a.PPLBase {
		t.Fatalf("PPL %v != base %v", *a.PPL, *a.PPLBase)
	}
	// The profile report.html draws: every scored token in the zero-KLD bin
	// and in a position bucket (score rows at 16..30, generate steps after
	// the prompt).
	var inBuckets int64
	for _, pb := range a.Profile.ByPosition.Buckets {
		inBuckets += pb.N
		if pb.SameTopP != 1 || *pb.KLDMean != 0 {
			t.Fatalf("identical backends, position bucket %+v", pb)
		}
	}
	if h := a.Profile.KLDHistogram; h.Zero != int64(a.ScoredTokens) || inBuckets != int64(a.ScoredTokens) || a.Profile.ByPosition.Buckets[0].Pos > 16 {
		t.Fatalf("profile: zero-KLD tokens %d, tokens in position buckets %d, want %d; %+v", h.Zero, inBuckets, a.ScoredTokens, a.Profile.ByPosition)
	}
	if b.Throughput == nil || b.Throughput.PP == nil || len(b.Throughput.PP.SamplesNS) != 3 || s.Reference.Throughput == nil {
		t.Fatalf("throughput missing: %+v / ref %+v", b.Throughput, s.Reference.Throughput)
	}
	// pp8 samples are 8ms, 8.8ms, 9.6ms: llama-bench's mean of rates.
	want := (8/0.008 + 8/0.0088 + 8/0.0096) / 3
	if d := b.Throughput.PP.AvgTS - want; d > 1e-6 || d < -1e-6 {
		t.Fatalf("pp avg_ts %v, want %v", b.Throughput.PP.AvgTS, want)
	}
	// The bench runs in rounds: one repetition of pp8 and of tg4 on each
	// backend in the round's order (roundOrder), three times, so both
	// sample the whole pass.
	if len(ref.benchAt) != 6 || len(same.benchAt) != 6 {
		t.Fatalf("Bench calls: reference %d, candidate %d, want 6 each (3 rounds × pp, tg)", len(ref.benchAt), len(same.benchAt))
	}
	last := int64(0)
	for i := range 3 {
		calls := [2][]int64{ref.benchAt[2*i : 2*i+2], same.benchAt[2*i : 2*i+2]}
		for _, k := range roundOrder(i, 2) {
			if c := calls[k]; c[0] < last || c[1] != c[0]+1 {
				t.Fatalf("round %d is not pp, tg on each backend in order %v: reference %v candidate %v", i, roundOrder(i, 2), ref.benchAt, same.benchAt)
			}
			last = calls[k][1]
		}
	}
	for _, f := range []string{"summary.json", "prompts.jsonl"} { // the rest is package report's
		if _, err := os.Stat(filepath.Join(res.Dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	lines := readLines(t, filepath.Join(res.Dir, "prompts.jsonl"))
	if len(lines) != 2*(8+3) {
		t.Fatalf("prompts.jsonl has %d lines, want 22 (8 chunks + 3 prompts, for the reference and the candidate)", len(lines))
	}
}

func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}

func TestRunNoisyCandidateFailsGate(t *testing.T) {
	noisy := newFake(64)
	noisy.noise = 0.5
	p := testPlan(t, 64, 256, 32, 4,
		spec.Backend{Name: "noisy", Plugin: "fake", Gates: spec.Gates{KLDMeanMax: ptr(0.001), SameTopPMin: ptr(0.5)}})
	res, out := runFakes(t, p, map[string]*fakeBackend{"ref": newFake(64), "noisy": noisy})
	s := res.Summary
	if s.Verdict.ExitCode != exitcode.GateFailed || s.Verdict.Status != summary.VerdictFail {
		t.Fatalf("verdict %+v\n%s", s.Verdict, out)
	}
	b := s.Backends[0]
	if b.Status != summary.StatusOK || b.Pass {
		t.Fatalf("status %s pass %v", b.Status, b.Pass)
	}
	if *b.Accuracy.KLDMean <= 0.001 {
		t.Fatalf("noise ±0.25 on logits in ±10 gave KLD %v", *b.Accuracy.KLDMean)
	}
	var failed []string
	for _, g := range b.Gates {
		if !g.Pass {
			failed = append(failed, g.Name)
		}
	}
	if len(failed) != 1 || failed[0] != "kld_mean_max" {
		t.Fatalf("failed gates %v, want [kld_mean_max] (same top p stays above 0.5)", failed)
	}
}

func TestRunCrashAndHangKeepOtherResults(t *testing.T) {
	crash := newFake(64)
	crash.crashAfterRows = 20
	hang := newFake(64)
	hang.hangAfterRows = 40
	p := testPlan(t, 64, 256, 32, 4,
		spec.Backend{Name: "crash", Plugin: "fake"},
		spec.Backend{Name: "good", Plugin: "fake", Gates: spec.Gates{KLDMeanMax: ptr(0)}},
		spec.Backend{Name: "hang", Plugin: "fake"})
	p.Spec.Timeouts.Eval = 300 * time.Millisecond
	res, out := runFakes(t, p, map[string]*fakeBackend{"ref": newFake(64), "crash": crash, "good": newFake(64), "hang": hang})
	s := readSummary(t, res.Dir)
	if s.Verdict.ExitCode != exitcode.Backend || s.Verdict.Status != summary.VerdictError {
		t.Fatalf("verdict %+v\n%s", s.Verdict, out)
	}
	by := map[string]summary.BackendSummary{}
	for _, b := range s.Backends {
		by[b.Name] = b
	}
	if by["crash"].Status != summary.StatusCrashed || by["crash"].Accuracy == nil || by["crash"].Accuracy.Tokens != 20 || by["crash"].Accuracy.Complete {
		t.Fatalf("crash: %+v %+v", by["crash"].Status, by["crash"].Accuracy)
	}
	if by["hang"].Status != summary.StatusTimeout || !strings.Contains(by["hang"].Error, "timed out") {
		t.Fatalf("hang: %s %q", by["hang"].Status, by["hang"].Error)
	}
	g := by["good"]
	if g.Status != summary.StatusOK || !g.Pass || !g.Accuracy.Complete || g.Accuracy.Tokens != 8*15+12 || g.Throughput == nil {
		t.Fatalf("the healthy backend's results are incomplete: %+v %+v", g.Status, g.Accuracy)
	}
	if by["crash"].Throughput != nil || by["hang"].Throughput != nil {
		t.Fatal("a stopped backend was benchmarked")
	}
}

func TestRunNaNFailsEvenWithoutGates(t *testing.T) {
	nan := newFake(64)
	nan.nanAt = 5
	p := testPlan(t, 64, 128, 32, 0, spec.Backend{Name: "nan", Plugin: "fake"})
	res, _ := runFakes(t, p, map[string]*fakeBackend{"ref": newFake(64), "nan": nan})
	b := res.Summary.Backends[0]
	if b.Accuracy.NaNCount != 1 || b.Pass || res.Summary.Verdict.ExitCode != exitcode.GateFailed {
		t.Fatalf("NaN count %d pass %v verdict %+v", b.Accuracy.NaNCount, b.Pass, res.Summary.Verdict)
	}
}

func TestRunReferenceLoadFailureSkipsCandidates(t *testing.T) {
	p := testPlan(t, 64, 128, 32, 0, spec.Backend{Name: "c", Plugin: "fake"})
	ref := newFake(64)
	ref.failLoad = true
	res, _ := runFakes(t, p, map[string]*fakeBackend{"ref": ref, "c": newFake(64)})
	s := res.Summary
	if s.Reference.Status != summary.StatusFailed || !strings.Contains(s.Reference.Error, "no device") {
		t.Fatalf("reference %s %q", s.Reference.Status, s.Reference.Error)
	}
	if s.Backends[0].Status != summary.StatusSkipped || s.Verdict.ExitCode != exitcode.Backend {
		t.Fatalf("candidate %s, verdict %+v", s.Backends[0].Status, s.Verdict)
	}
}

// TestRunMemoryFlat shows that the host's memory does not grow with the
// dataset: 4× the tokens (with a 32000-entry vocabulary, 128 KB of logits
// per position and backend) leave the peak heap about where it was. What
// does grow is 4 bytes per dataset token (the tokenized stream) and 8 bytes
// per scored token per candidate (llama-perplexity's per-token KLD and Δp,
// kept for exact percentiles).
func TestRunMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("memory measurement")
	}
	const nVocab = 32000
	peak := func(nTok int) uint64 {
		p := testPlan(t, nVocab, nTok, 64, 0, spec.Backend{Name: "c", Plugin: "fake"})
		p.Spec.Bench.Enabled = false
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var max atomic.Uint64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			var ms runtime.MemStats
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > max.Load() {
					max.Store(ms.HeapInuse)
				}
			}
		}()
		runFakes(t, p, map[string]*fakeBackend{"ref": newFake(nVocab), "c": newFake(nVocab)})
		close(stop)
		<-done
		return max.Load() - min(max.Load(), base.HeapInuse)
	}
	small := peak(64 * 16) // 16 chunks, 496 scored positions: 62 MB of logits per backend
	large := peak(64 * 64) // 64 chunks, 1984 positions: 254 MB of logits per backend
	t.Logf("peak heap growth: %d chunks %.1f MB, %d chunks %.1f MB", 16, float64(small)/1e6, 64, float64(large)/1e6)
	// The logits of the larger run alone would be 190 MB more per backend.
	if large > small+16<<20 {
		t.Fatalf("peak heap grew from %.1f MB to %.1f MB with 4x the dataset", float64(small)/1e6, float64(large)/1e6)
	}
}

// TestRunInterruptedKeepsResults: an interrupt (SIGINT cancels the context)
// mid-run still writes summary.json with what was compared, marks the run
// incomplete, and does not blame the backends.
func TestRunInterruptedKeepsResults(t *testing.T) {
	slow := newFake(64)
	p := testPlan(t, 64, 1024, 32, 0, spec.Backend{Name: "c", Plugin: "fake"})
	ctx, cancel := context.WithCancel(context.Background())
	slow.onRow = func(n int64) {
		if n == 100 {
			cancel()
		}
	}
	var errb bytes.Buffer
	res, err := Run(ctx, p, Options{OutDir: filepath.Join(p.Spec.Output.Dir, "run"), Stderr: &errb, Launch: fakeLauncher(map[string]*fakeBackend{"ref": newFake(64), "c": slow})})
	if err != nil {
		t.Fatal(err)
	}
	s := readSummary(t, res.Dir)
	b := s.Backends[0]
	if s.Verdict.ExitCode != exitcode.Backend || !strings.Contains(strings.Join(s.Verdict.Reasons, ";"), "interrupted") {
		t.Fatalf("verdict %+v", s.Verdict)
	}
	if b.Status != summary.StatusOK || b.Accuracy == nil || b.Accuracy.Tokens == 0 || b.Accuracy.Complete || b.Pass {
		t.Fatalf("backend %s, accuracy %+v", b.Status, b.Accuracy)
	}
}

// promptDigests reads prompts.jsonl's digests as backend -> "dataset/id" -> digest.
func promptDigests(t *testing.T, dir string) map[string]map[string]digest.Prompt {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]digest.Prompt{}
	dec := json.NewDecoder(f)
	for dec.More() {
		var p summary.PromptResult
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.PromptDigest == nil || p.Rows() == 0 {
			t.Fatalf("line without a digest: %+v", p)
		}
		if out[p.Backend] == nil {
			out[p.Backend] = map[string]digest.Prompt{}
		}
		out[p.Backend][p.Dataset+"/"+p.ID] = *p.PromptDigest
	}
	return out
}

// The digests are of the logits exactly as the backend returned them: the
// fake's rows recomputed here hash the same; a backend whose logits differ
// in one row is told apart at that row, and every digest of the run is in
// summary.json.
func TestRunDigestsAreTheReturnedLogits(t *testing.T) {
	const nVocab, nCtx = 64, 32
	noisy := newFake(nVocab)
	noisy.noise = 0.5
	p := testPlan(t, nVocab, 256, nCtx, 4, spec.Backend{Name: "same", Plugin: "fake"}, spec.Backend{Name: "noisy", Plugin: "fake"})
	res, out := runFakes(t, p, map[string]*fakeBackend{"ref": newFake(nVocab), "same": newFake(nVocab), "noisy": noisy})
	d := promptDigests(t, res.Dir)
	if len(d) != 3 || len(d["ref"]) != 8+3 {
		t.Fatalf("digests for %d backends, %d reference lines\n%s", len(d), len(d["ref"]), out)
	}
	// Chunk 2 recomputed: BOS over position 0, rows from n_ctx/2 to n_ctx-2.
	ch := plan.Chunk{Tokens: p.Datasets[0].Stream[nCtx : 2*nCtx], BOS: p.BOS}
	fake, h := newFake(nVocab), digest.NewHasher(ch.First())
	h.Tokens(ch.Input())
	hist := uint64(1) // the fake's history hash before the first token
	row := make([]float32, nVocab)
	for i, tok := range ch.Input() {
		hist = mix(hist, tok)
		if i >= ch.First() {
			fake.row(hist, row)
			h.Row(row)
		}
	}
	want := h.Sum()
	got := d["ref"]["score/chunk-2"]
	if got.LogitsSHA256 != want.LogitsSHA256 || got.TokensSHA256 != want.TokensSHA256 || got.LogitsFrom != 16 || got.Rows() != 15 {
		t.Fatalf("reference chunk 2: %+v\nwant %+v", got, want)
	}
	for k, ref := range d["ref"] {
		same, noise := d["same"][k], d["noisy"][k]
		if same.LogitsSHA256 != ref.LogitsSHA256 || same.FirstDiff(ref) != -1 {
			t.Errorf("%s: identical backend, digest differs", k)
		}
		if noise.LogitsSHA256 == ref.LogitsSHA256 || noise.FirstDiff(ref) != 0 || noise.TokensSHA256 != ref.TokensSHA256 {
			t.Errorf("%s: noisy backend: first diff %d, same tokens %v", k, noise.FirstDiff(ref), noise.TokensSHA256 == ref.TokensSHA256)
		}
	}
	s := res.Summary
	rd, sd, nd := s.Reference.Digest, s.Backends[0].Digest, s.Backends[1].Digest
	if rd == nil || sd == nil || nd == nil || rd.Prompts != 11 || rd.Rows != 8*15+3*4 {
		t.Fatalf("run digests %+v %+v %+v", rd, sd, nd)
	}
	if *sd != *rd || nd.LogitsSHA256 == rd.LogitsSHA256 || nd.TokensSHA256 != rd.TokensSHA256 {
		t.Fatalf("run digests: ref %+v same %+v noisy %+v", rd, sd, nd)
	}
}

// Speed gates do not apply to a simulated device unless the gates say so;
// its throughput is labelled simulated.
func TestRunSpeedGatesSkipSimulatedDevices(t *testing.T) {
	on := true
	gates := spec.Gates{TGTSMin: ptr(1e12)} // no backend is this fast
	p := testPlan(t, 32, 64, 32, 0,
		spec.Backend{Name: "sim", Plugin: "fake", Gates: gates},
		spec.Backend{Name: "sim-gated", Plugin: "fake", Gates: spec.Gates{TGTSMin: ptr(1e12), SpeedGatesOnSimulated: &on}},
		spec.Backend{Name: "real", Plugin: "fake", Gates: gates})
	sim, simGated := newFake(32), newFake(32)
	sim.simulated, simGated.simulated = true, true
	res, out := runFakes(t, p, map[string]*fakeBackend{"ref": newFake(32), "sim": sim, "sim-gated": simGated, "real": newFake(32)})
	b := res.Summary.Backends
	if !b[0].Throughput.Simulated || b[2].Throughput.Simulated {
		t.Fatalf("simulated labels: %v %v\n%s", b[0].Throughput.Simulated, b[2].Throughput.Simulated, out)
	}
	if g := b[0].Gates[0]; !b[0].Pass || !g.Pass || !g.Skipped || !strings.Contains(g.Note, "simulated") {
		t.Fatalf("simulated backend's speed gate: %+v", g)
	}
	if g := b[1].Gates[0]; b[1].Pass || g.Pass || g.Skipped {
		t.Fatalf("speed_gates_on_simulated: %+v", g)
	}
	if g := b[2].Gates[0]; b[2].Pass || g.Pass || g.Skipped {
		t.Fatalf("real device's speed gate: %+v", g)
	}
	if st := b[0].Throughput.TG.Stats; st == nil || st.N != 3 || st.Lo != nil {
		t.Fatalf("3 repetitions: %+v (no 95%% interval with 3)", st)
	}
}

// A relative gate without a baseline is bad input, found before any
// backend starts.
func TestRunRelativeGateNeedsABaseline(t *testing.T) {
	p := testPlan(t, 32, 64, 32, 0, spec.Backend{Name: "b", Plugin: "fake", Gates: spec.Gates{KLDMeanMaxIncrease: ptr(0)}})
	launched := false
	_, err := Run(context.Background(), p, Options{OutDir: t.TempDir(), Stderr: io.Discard,
		Launch: func(context.Context, spec.Backend, Launch) (backend.Backend, Process, error) {
			launched = true
			return nil, nil, errors.New("unreachable")
		}})
	var ie *exitcode.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "kld_mean_max_increase compares with a baseline run") || launched {
		t.Fatalf("err %v, launched %v", err, launched)
	}
}

// gates.speed_baseline judges a candidate's slowdown gates against another
// backend of the same run, with no baseline run: a 20 % slower build fails,
// an equal one passes, a simulated device is not gated.
func TestRunSpeedBaselineJudgesInTheRun(t *testing.T) {
	old := "old"
	gates := spec.Gates{PPTSMaxSlowdown: ptr(0.05), TGTSMaxSlowdown: ptr(0.05), SpeedBaseline: &old}
	p := testPlan(t, 32, 64, 32, 0,
		spec.Backend{Name: "old", Plugin: "fake"},
		spec.Backend{Name: "same", Plugin: "fake", Gates: gates},
		spec.Backend{Name: "slower", Plugin: "fake", Gates: gates},
		spec.Backend{Name: "sim", Plugin: "fake", Gates: gates})
	p.Spec.Bench.Reps = 100 // the p95 test needs >= 60 a side
	fakes := map[string]*fakeBackend{"ref": newFake(32), "old": newFake(32), "same": newFake(32), "slower": newFake(32), "sim": newFake(32)}
	for name, f := range fakes {
		f.benchNS = jitter(1)
		if name == "slower" || name == "sim" {
			f.benchNS = jitter(1.25) // 20 % fewer tokens/s
		}
	}
	fakes["sim"].simulated = true
	res, out := runFakes(t, p, fakes)
	b := res.Summary.Backends
	if g := b[1].Gates; !b[1].Pass || len(g) != 2 || !g[0].Pass || !strings.Contains(g[0].Note, "(old in this run)") || !strings.Contains(g[0].Note, "not significant") {
		t.Fatalf("an equal build: pass %v, gates %+v\n%s", b[1].Pass, g, out)
	}
	for _, g := range b[2].Gates {
		if g.Pass || g.Value == nil || *g.Value < 0.19 || *g.Value > 0.21 || !strings.Contains(g.Note, "significant") {
			t.Fatalf("a 20 %% slower build: %+v\n%s", g, out)
		}
	}
	if g := b[3].Gates; !b[3].Pass || len(g) != 2 || !g[0].Skipped {
		t.Fatalf("a simulated device: %+v", g)
	}
	if v := res.Summary.Verdict; v.ExitCode != exitcode.GateFailed || !strings.Contains(strings.Join(v.Reasons, "\n"), "slower: gate pp_ts_max_slowdown") {
		t.Fatalf("verdict %+v", v)
	}
}

// Slowdown gates that the bench's repetitions can never fail are named
// by evalrun validate (and logged at the start of a run).
func TestValidateWarnsOfTooFewRepsForSlowdownGates(t *testing.T) {
	p := speedPairPlan(t, 64, 20, spec.Gates{TGTSMaxSlowdown: ptr(0.02)})
	fakes := map[string]*fakeBackend{"ref": newFake(32), "old": newFake(32), "new": newFake(32)}
	warnings, err := Validate(context.Background(), p, Options{Stderr: io.Discard, Launch: fakeLauncher(fakes)})
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "new: gate tg_ts_max_slowdown: bench.reps is 20, and the p95 test needs >= 60") {
		t.Fatalf("warnings %q, err %v", warnings, err)
	}
	p.Spec.Bench.Reps = 60
	if warnings, err := Validate(context.Background(), p, Options{Stderr: io.Discard, Launch: fakeLauncher(fakes)}); err != nil || len(warnings) != 0 {
		t.Fatalf("60 repetitions: warnings %q, err %v", warnings, err)
	}
}

// A run whose backends have no gates checked nothing: its verdict says so
// (exit 0), in summary.json, the table and report.md, not "pass".
func TestRunWithoutGatesSaysSo(t *testing.T) {
	p := testPlan(t, 64, 128, 32, 0, spec.Backend{Name: "free", Plugin: "fake"})
	res, _ := runFakes(t, p, map[string]*fakeBackend{"ref": newFake(64), "free": newFake(64)})
	s := readSummary(t, res.Dir)
	if s.Verdict.Status != summary.VerdictNoGates || s.Verdict.ExitCode != exitcode.Pass || !s.Backends[0].Pass {
		t.Fatalf("verdict %+v, backend pass %v", s.Verdict, s.Backends[0].Pass)
	}
	if !strings.Contains(strings.Join(s.Verdict.Reasons, "\n"), "no gates configured") {
		t.Errorf("reasons %q", s.Verdict.Reasons)
	}
	// One gate anywhere makes it a real pass.
	p = testPlan(t, 64, 128, 32, 0, spec.Backend{Name: "free", Plugin: "fake"}, spec.Backend{Name: "gated", Plugin: "fake", Gates: spec.Gates{KLDMeanMax: ptr(0)}})
	res, _ = runFakes(t, p, map[string]*fakeBackend{"ref": newFake(64), "free": newFake(64), "gated": newFake(64)})
	if v := res.Summary.Verdict; v.Status != summary.VerdictPass {
		t.Errorf("with a gate: verdict %+v", v)
	}
}

// Results safety: a second run into the same directory is refused unless
// forced; every run is recorded with its effective spec, host CPU and
// dataset digests. A run into the results root (no --out) is listed in the
// root's index.jsonl; a run given its directory writes nothing outside it.
func TestRunKeepsEarlierResultsAndListsRuns(t *testing.T) {
	p := testPlan(t, 32, 64, 32, 0, spec.Backend{Name: "b", Plugin: "fake", Gates: spec.Gates{KLDMeanMax: ptr(0)}})
	p.Datasets[0].SHA256 = strings.Repeat("ab", 32)
	fakes := func() map[string]*fakeBackend { return map[string]*fakeBackend{"ref": newFake(32), "b": newFake(32)} }
	res, _ := runFakes(t, p, fakes())
	s := readSummary(t, res.Dir)
	if s.Run.EffectiveSpec["name"] != "test" || s.Run.EffectiveSpec["bench"].(map[string]any)["reps"] != float64(3) {
		t.Errorf("effective spec %v", s.Run.EffectiveSpec)
	}
	if s.Run.Host.CPUModel == "" || s.Datasets[0].SHA256 != p.Datasets[0].SHA256 {
		t.Errorf("cpu model %q, dataset sha256 %q", s.Run.Host.CPUModel, s.Datasets[0].SHA256)
	}
	stale := filepath.Join(res.Dir, "report.html")
	os.WriteFile(stale, []byte("an earlier run's"), 0o644)

	launched := false
	_, err := Run(context.Background(), p, Options{OutDir: res.Dir, Stderr: io.Discard,
		Launch: func(context.Context, spec.Backend, Launch) (backend.Backend, Process, error) {
			launched = true
			return nil, nil, errors.New("unreachable")
		}})
	var ie *exitcode.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "holds the results of an earlier run (summary.json): choose another --out, or --force") || launched {
		t.Fatalf("second run into %s: %v (plugins launched: %v)", res.Dir, err, launched)
	}
	if _, err := Run(context.Background(), p, Options{OutDir: res.Dir, Force: true, Stderr: io.Discard, Launch: fakeLauncher(fakes())}); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("--force kept the earlier run's report.html (%v)", err)
	}
	root := p.Spec.Output.Dir
	if entries, _ := os.ReadDir(root); len(entries) != 1 || entries[0].Name() != filepath.Base(res.Dir) {
		t.Fatalf("runs into --out %s wrote beside it: %v", res.Dir, entries)
	}

	var ids []string
	for i := range 2 {
		clock := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5+i, 0, time.UTC) }
		r, err := Run(context.Background(), p, Options{Stderr: io.Discard, Launch: fakeLauncher(fakes()), Now: clock})
		if err != nil {
			t.Fatalf("run %d into the results root: %v", i, err)
		}
		if filepath.Dir(r.Dir) != root {
			t.Fatalf("run %d: results in %s, not in the root %s", i, r.Dir, root)
		}
		ids = append(ids, r.Summary.Run.ID)
	}
	index := readLines(t, filepath.Join(root, "index.jsonl"))
	if len(index) != 2 || index[0]["dir"] != filepath.Join(root, ids[0]) || index[1]["verdict"] != summary.VerdictPass ||
		index[0]["id"] != ids[0] || index[1]["id"] != ids[1] {
		t.Fatalf("index.jsonl: %v", index)
	}
}

// A shard or a resumed run scores only part of the chunks: a kld-base file
// it wrote would be incomplete, so output.kld_base is refused at its key
// (exit 2), nothing overwritten.
func TestRunPartOfTheChunksWritesNoKLDBase(t *testing.T) {
	for _, opt := range []Options{{Shard: &resultsdir.Shard{Index: 0, Total: 2}}, {Resume: true}} {
		p := testPlan(t, 32, 64, 32, 0, spec.Backend{Name: "b", Plugin: "fake"})
		out := filepath.Join(t.TempDir(), "b.kld")
		p.Spec.Candidates[0].Output.KLDBase = out
		opt.OutDir, opt.Stderr, opt.Launch = t.TempDir(), io.Discard, fakeLauncher(map[string]*fakeBackend{"ref": newFake(32), "b": newFake(32)})
		_, err := Run(context.Background(), p, opt)
		var ie *exitcode.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "backends[0].output.kld_base: a shard or a resumed run cannot write a kld-base file") {
			t.Errorf("shard %v resume %v: err %v", opt.Shard, opt.Resume, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("shard %v resume %v: %s written (%v)", opt.Shard, opt.Resume, out, err)
		}
	}
}

// TestRoundOrderBalancesPlaces: the bench's order within a round is the
// same for every run and puts each backend in each place about equally
// often, so no backend is always the one after the simulator's turn (a
// place that measures slower: docs/design-notes.md, roundOrder).
func TestRoundOrderBalancesPlaces(t *testing.T) {
	const rounds, n = 300, 4
	var places [n][n]int
	for round := range rounds {
		order := roundOrder(round, n)
		if !slices.Equal(order, roundOrder(round, n)) {
			t.Fatalf("round %d: two orders %v and %v", round, order, roundOrder(round, n))
		}
		seen := map[int]bool{}
		for place, k := range order {
			if k < 0 || k >= n || seen[k] {
				t.Fatalf("round %d: %v is not a permutation of %d backends", round, order, n)
			}
			seen[k] = true
			places[k][place]++
		}
	}
	for k := range n {
		for place, c := range places[k] {
			// Binomial(300, 1/4): mean 75, sd 7.5; 45..105 is 4 sd.
			if c < 45 || c > 105 {
				t.Errorf("backend %d took place %d in %d of %d rounds, want about %d", k, place, c, rounds, rounds/n)
			}
		}
	}
}

// TestRunRefusesImpossibleBenchTimings: a plugin reporting bench timings no clock can have
// measured (a negative repetition, 0 ns, longer than the bench's time
// limit) is failed with a message saying so, its accuracy kept, the exit
// code a backend's fault; the honest backend's throughput stands.
func TestRunRefusesImpossibleBenchTimings(t *testing.T) {
	for _, c := range []struct {
		name string
		ns   int64
		want string
	}{
		{"negative", -1, "impossible time for repetition 1: -8 ns"},
		{"zero", 0, "impossible time for repetition 1: 0 ns"},
		{"over the limit", int64(time.Hour), "impossible time for repetition 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			liar := newFake(64)
			liar.benchNS = func(int) int64 { return c.ns }
			p := testPlan(t, 64, 128, 32, 0, spec.Backend{Name: "liar", Plugin: "fake"}, spec.Backend{Name: "good", Plugin: "fake"})
			p.Spec.Bench.Reps = 3
			res, out := runFakes(t, p, map[string]*fakeBackend{"ref": newFake(64), "liar": liar, "good": newFake(64)})
			s := readSummary(t, res.Dir)
			liarSum, good := s.Backends[0], s.Backends[1]
			if liarSum.Status != summary.StatusFailed || !strings.Contains(liarSum.Error, c.want) || liarSum.Throughput != nil || liarSum.Accuracy == nil {
				t.Errorf("liar: %s %q throughput %v accuracy %v\n%s", liarSum.Status, liarSum.Error, liarSum.Throughput, liarSum.Accuracy != nil, out)
			}
			if good.Status != summary.StatusOK || good.Throughput == nil {
				t.Errorf("good: %s %q", good.Status, good.Error)
			}
			if s.Verdict.ExitCode != exitcode.Backend {
				t.Errorf("exit %d, want %d", s.Verdict.ExitCode, exitcode.Backend)
			}
		})
	}
}
