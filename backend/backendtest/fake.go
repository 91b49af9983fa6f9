// Package backendtest holds a fake Backend with fully predictable results, as
// net/http/httptest does for HTTP: the adapter tests serve it in-process, the
// test plugin binary under backend/testdata serves it as a real process, and
// hosts and plugin authors can check a transport without a model.
package backendtest

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/evalrun/evalrun/backend"
)

// Fake implements backend.Backend. Row i of an Eval is
// [pos, token, len(tokens), 3*0.25, 4*0.25, ...] over Vocab values.
type Fake struct {
	// OnLoad and OnEval let a test plugin misbehave (print, crash, hang) at
	// a chosen point. OnEval runs before each row is emitted.
	OnLoad func(req backend.LoadRequest)
	OnEval func(session string, index int)
	// OnValidate returns Validate's warnings.
	OnValidate func(req backend.LoadRequest) []string

	mu       sync.Mutex
	loaded   bool
	vocab    int
	sessions map[string]int // session -> next position
}

// DefaultVocab is the row length when the "vocab" option is not given.
const DefaultVocab = 8

// Info is what Describe returns.
var Info = backend.Info{Name: "fake", Version: "1.2.3", Device: "test", Capabilities: []string{"eval", "bench"}}

var validOptions = []string{"print", "vocab"}

// Describe implements backend.Backend.
func (f *Fake) Describe(context.Context) (backend.Info, error) { return Info, nil }

// options checks Load's options: vocab (positive integer), print (bool).
func options(req backend.LoadRequest) (vocab int, err error) {
	vocab = DefaultVocab
	names := make([]string, 0, len(req.Options))
	for k := range req.Options {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := req.Options[k]
		switch k {
		case "vocab":
			n, ok := v.(float64) // JSON numbers arrive as float64
			if !ok || n < 1 || n != math.Trunc(n) || n > 1<<24 {
				return 0, backend.Errorf(backend.ErrInvalidArgument, "option %q: want a positive integer, got %v", k, v)
			}
			vocab = int(n)
		case "print":
			if _, ok := v.(bool); !ok {
				return 0, backend.Errorf(backend.ErrInvalidArgument, "option %q: want true or false, got %v", k, v)
			}
		default:
			return 0, backend.Errorf(backend.ErrInvalidArgument,
				"unknown option %q (valid options: %s)", k, strings.Join(validOptions, ", "))
		}
	}
	return vocab, nil
}

// Validate implements backend.Validator: the options as Load checks them,
// and OnValidate's warnings.
func (f *Fake) Validate(_ context.Context, req backend.LoadRequest) ([]string, error) {
	if _, err := options(req); err != nil {
		return nil, err
	}
	if f.OnValidate != nil {
		return f.OnValidate(req), nil
	}
	return nil, nil
}

// Load implements backend.Backend. Options: vocab (positive integer), print (bool).
func (f *Fake) Load(ctx context.Context, req backend.LoadRequest) (backend.LoadResult, error) {
	if req.ModelPath == "" {
		return backend.LoadResult{}, backend.Errorf(backend.ErrInvalidArgument, "model_path is empty")
	}
	vocab, err := options(req)
	if err != nil {
		return backend.LoadResult{}, err
	}
	if f.OnLoad != nil {
		f.OnLoad(req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loaded, f.vocab, f.sessions = true, vocab, map[string]int{}
	return backend.LoadResult{
		Model: backend.ModelInfo{Arch: "fake", NVocab: vocab, NParams: 1234, NCtxTrain: req.NCtx, NLayer: 2, NEmbd: 16, FileType: "F32", SizeBytes: 4096},
		Plan: []backend.PlanEntry{
			{Op: "Qcur-0", Device: "npu", Shape: "1×16×16"},
			{Op: "result_output", Device: "cpu", Shape: "1×16×8", Reason: "not in kernel list"},
		},
		PlanSummary: "1 of 2 matmuls on the NPU",
		LoadNS:      11,
		WarmupNS:    22,
		MemoryBytes: int64(req.Threads) * 1000,
	}, nil
}

// Eval implements backend.Backend.
func (f *Fake) Eval(ctx context.Context, req backend.EvalRequest, emit func(backend.Logits) error) error {
	f.mu.Lock()
	if !f.loaded {
		f.mu.Unlock()
		return backend.Errorf(backend.ErrNotLoaded, "eval: no model loaded (call Load first)")
	}
	start := f.sessions[req.Session]
	switch {
	case req.Pos == -1:
	case req.Pos < -1 || req.Pos > start:
		f.mu.Unlock()
		return backend.Errorf(backend.ErrInvalidArgument, "eval: pos %d outside 0..%d of session %q", req.Pos, start, req.Session)
	default:
		start = req.Pos
	}
	if req.LogitsFrom < 0 || req.LogitsFrom > len(req.Tokens) {
		f.mu.Unlock()
		return backend.Errorf(backend.ErrInvalidArgument, "eval: logits_from %d outside 0..%d", req.LogitsFrom, len(req.Tokens))
	}
	f.sessions[req.Session] = start + len(req.Tokens)
	vocab := f.vocab
	f.mu.Unlock()

	row := make([]float32, vocab)
	for j := range row {
		row[j] = float32(j) * 0.25
	}
	for i := req.LogitsFrom; i < len(req.Tokens); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if f.OnEval != nil {
			f.OnEval(req.Session, i)
		}
		row[0] = float32(start + i)
		if vocab > 1 {
			row[1] = float32(req.Tokens[i])
		}
		if vocab > 2 {
			row[2] = float32(len(req.Tokens))
		}
		if err := emit(backend.Logits{Index: i, Pos: start + i, Values: row}); err != nil {
			return err
		}
	}
	return nil
}

// Bench implements backend.Backend: sample r is r+1 ns.
func (f *Fake) Bench(ctx context.Context, req backend.BenchRequest) (backend.BenchResult, error) {
	if req.Reps < 1 {
		return backend.BenchResult{}, backend.Errorf(backend.ErrInvalidArgument, "bench: reps %d, want at least 1", req.Reps)
	}
	res := backend.BenchResult{NPrompt: req.NPrompt, NGen: req.NGen, NDepth: req.NDepth}
	for r := range req.Reps {
		res.SamplesNS = append(res.SamplesNS, int64(r+1))
	}
	if req.Warmup {
		res.WarmupNS = 7
	}
	return res, nil
}

// Close implements backend.Backend.
func (f *Fake) Close(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loaded = false
	return nil
}

// CheckRow reports how row differs from what Fake emits for token tok at pos
// in a request of n tokens ("" if it matches).
func CheckRow(row []float32, pos int, tok int32, n, vocab int) string {
	if len(row) != vocab {
		return fmt.Sprintf("row has %d values, want %d", len(row), vocab)
	}
	want := make([]float32, vocab)
	for j := range want {
		want[j] = float32(j) * 0.25
	}
	want[0] = float32(pos)
	if vocab > 1 {
		want[1] = float32(tok)
	}
	if vocab > 2 {
		want[2] = float32(n)
	}
	for j := range want {
		if row[j] != want[j] {
			return fmt.Sprintf("value %d = %v, want %v", j, row[j], want[j])
		}
	}
	return ""
}
