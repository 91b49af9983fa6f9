package pipeline

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// fakeBackend is an in-process backend whose logits are a deterministic
// function of the token history, so two fakes with the same settings agree
// exactly, and noise or faults can be injected into one of them.
type fakeBackend struct {
	nVocab int
	noise  float32 // amplitude of a deterministic perturbation
	name   string

	crashAfterRows int64 // >0: Eval fails as a crash after this many rows
	hangAfterRows  int64 // >0: Eval blocks until its ctx ends after this many rows
	nanAt          int64 // >0: the row with this number gets a NaN
	failLoad       bool  // Load fails (not as bad input)
	simulated      bool  // Describe declares a simulated device
	onRow          func(n int64)
	benchNS        func(i int) int64 // nil: the i-th repetition's ns per token is 1e6 × (1 + i/10)

	mu       sync.Mutex
	sessions map[string][]uint64 // per position: rolling hash of the history
	rows     atomic.Int64
	dead     atomic.Bool
	evals    atomic.Int64
	benchN   [2]int  // Bench calls so far per test (pp, tg)
	benchAt  []int64 // benchSeq at each Bench call: the order across fakes
}

// benchSeq numbers Bench calls across every fake.
var benchSeq atomic.Int64

func newFake(nVocab int) *fakeBackend {
	return &fakeBackend{nVocab: nVocab, sessions: map[string][]uint64{}, name: "fake"}
}

func (f *fakeBackend) Describe(context.Context) (backend.Info, error) {
	info := backend.Info{Name: f.name, Version: "1", Device: "test"}
	if f.simulated {
		info.Capabilities = []string{backend.CapabilitySimulated}
	}
	return info, nil
}

func (f *fakeBackend) Load(_ context.Context, req backend.LoadRequest) (backend.LoadResult, error) {
	if _, ok := req.Options["bad"]; ok {
		return backend.LoadResult{}, backend.Errorf(backend.ErrInvalidArgument, "unknown option \"bad\"")
	}
	if f.failLoad {
		return backend.LoadResult{}, errors.New("no device")
	}
	return backend.LoadResult{Model: backend.ModelInfo{Arch: "fake", NVocab: f.nVocab}, PlanSummary: "all on the test device"}, nil
}

func mix(h uint64, tok int32) uint64 {
	h ^= uint64(tok) + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
	h *= 0xff51afd7ed558ccd
	return h ^ (h >> 33)
}

// row fills the logits after a history with hash h.
func (f *fakeBackend) row(h uint64, dst []float32) {
	x := h
	for i := range dst {
		x = x*6364136223846793005 + 1442695040888963407
		v := float32(int32(x>>33)%2000) / 200 // -10..10
		if f.noise != 0 {
			y := (x >> 17) & 1023
			v += f.noise * (float32(y)/1023 - 0.5)
		}
		dst[i] = v
	}
}

func (f *fakeBackend) Eval(ctx context.Context, req backend.EvalRequest, emit func(backend.Logits) error) error {
	if f.dead.Load() {
		return backend.ErrCrashed
	}
	f.evals.Add(1)
	f.mu.Lock()
	hist := f.sessions[req.Session]
	if req.Pos >= 0 {
		if req.Pos > len(hist) {
			f.mu.Unlock()
			return backend.Errorf(backend.ErrInvalidArgument, "pos %d beyond %d", req.Pos, len(hist))
		}
		hist = hist[:req.Pos]
	}
	start := len(hist)
	for _, t := range req.Tokens {
		if t < 0 || int(t) >= f.nVocab {
			f.mu.Unlock()
			return backend.Errorf(backend.ErrInvalidArgument, "token %d", t)
		}
		prev := uint64(1)
		if len(hist) > 0 {
			prev = hist[len(hist)-1]
		}
		hist = append(hist, mix(prev, t))
	}
	f.sessions[req.Session] = hist
	f.mu.Unlock()
	buf := make([]float32, f.nVocab)
	for i := req.LogitsFrom; i < len(req.Tokens); i++ {
		n := f.rows.Add(1)
		if f.onRow != nil {
			f.onRow(n)
		}
		if f.crashAfterRows > 0 && n > f.crashAfterRows {
			f.dead.Store(true)
			return backend.ErrCrashed
		}
		if f.hangAfterRows > 0 && n > f.hangAfterRows {
			<-ctx.Done()
			return ctx.Err()
		}
		f.row(hist[start+i], buf)
		if f.nanAt > 0 && n == f.nanAt {
			buf[3] = float32(math.NaN())
		}
		if err := emit(backend.Logits{Index: i, Pos: start + i, Values: buf}); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeBackend) Bench(_ context.Context, req backend.BenchRequest) (backend.BenchResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.benchAt = append(f.benchAt, benchSeq.Add(1))
	kind := 0
	if req.NGen > 0 {
		kind = 1
	}
	// The i-th repetition of a test, counted over all calls, takes 1 ms per
	// token × (1 + i/10).
	s := make([]int64, req.Reps)
	for i := range s {
		s[i] = int64(1000000 * (req.NPrompt + req.NGen) * (10 + f.benchN[kind]) / 10)
		if f.benchNS != nil {
			s[i] = int64(req.NPrompt+req.NGen) * f.benchNS(f.benchN[kind])
		}
		f.benchN[kind]++
	}
	return backend.BenchResult{NPrompt: req.NPrompt, NGen: req.NGen, SamplesNS: s}, nil
}

func (f *fakeBackend) Close(context.Context) error { return nil }

// fakeProc lets the runner see a crashed fake as an exited process.
type fakeProc struct{ f *fakeBackend }

func (p fakeProc) Exited() bool           { return p.f.dead.Load() }
func (p fakeProc) Kill()                  {}
func (p fakeProc) PeakRSS() (int64, bool) { return 0, false }

// fakeLauncher hands out the fakes by backend name.
func fakeLauncher(fakes map[string]*fakeBackend) Launcher {
	return func(_ context.Context, b spec.Backend, _ Launch) (backend.Backend, Process, error) {
		f, ok := fakes[b.Name]
		if !ok {
			return nil, nil, errors.New("no such test backend " + b.Name)
		}
		return f, fakeProc{f}, nil
	}
}

// jitter is a fake's bench: repetition i takes scale ms per token, give or
// take 10 % (a fixed pattern).
func jitter(scale float64) func(i int) int64 {
	return func(i int) int64 { return int64(scale * 1e6 * (1 + float64(i*37%100)/1000)) }
}

// speedPairPlan plans candidates old and new over nTok tokens, benched reps
// times, new's gates judging its speed against old (speed_baseline).
func speedPairPlan(t *testing.T, nTok, reps int, gates spec.Gates) *plan.Plan {
	old := "old"
	gates.SpeedBaseline = &old
	p := testPlan(t, 32, nTok, 32, 0, spec.Backend{Name: "old", Plugin: "fake"}, spec.Backend{Name: "new", Plugin: "fake", Gates: gates})
	p.Spec.Bench.Reps = reps
	return p
}
