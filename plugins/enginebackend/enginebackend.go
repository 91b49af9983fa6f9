// Package enginebackend implements backend.Backend on top of the evalrun
// engine. The cpu, rknn and hexagon plugins share it and differ only in
// their Config: which options they accept and which device they attach to
// the loaded model (see Device).
//
// Concurrency: the engine runs one model with one worker pool, so all calls
// except Describe are serialized; Eval calls on different sessions run one
// after the other.
package enginebackend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/engine/tokenizer"
	"github.com/evalrun/evalrun/plugins/internal/optdecode"
)

// Config describes one engine plugin.
type Config struct {
	Name, Version, Device string
	Capabilities          []string
	// Options parses the plugin's own options and says which device to
	// attach; nil accepts none and runs every matmul on the CPU.
	Options OptionsParser
	// Logger is the plugin's logger; nil is silent.
	Logger hclog.Logger
	// MapWeights: the plugin's device evicts the weights it has copied
	// (gguf.File.Evict), which gives memory back only from a mapping, so
	// the option weights: auto maps the file.
	MapWeights bool
}

// EvalBatch is the most tokens one forward pass takes in Eval (llama.cpp's
// default n_ubatch); longer requests are decoded in chunks of this size,
// which bounds memory and lets a cancelled call stop between chunks.
const EvalBatch = 512

// Backend is the engine-backed backend.Backend.
type Backend struct {
	cfg Config

	mu       sync.Mutex
	model    *engine.Model
	device   Device // nil: CPU only
	nCtx     int
	sessions map[string]*engine.Session
	// simulated: the loaded device says it is a simulator (Simulator);
	// read by Describe, which is not serialized with Load.
	simulated atomic.Bool
}

var _ backend.Backend = (*Backend)(nil)

// New returns an unloaded Backend.
func New(cfg Config) *Backend {
	if cfg.Options == nil {
		cfg.Options = NoOptions()
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Backend{cfg: cfg}
}

// Describe implements backend.Backend.
func (b *Backend) Describe(context.Context) (backend.Info, error) {
	caps := append([]string(nil), b.cfg.Capabilities...)
	if b.simulated.Load() {
		caps = append(caps, backend.CapabilitySimulated)
	}
	return backend.Info{
		Name:         b.cfg.Name,
		Version:      b.cfg.Version,
		Device:       b.cfg.Device,
		Capabilities: caps,
	}, nil
}

// parse checks a LoadRequest's sizes and options without opening anything:
// the engine's options, how to attach the plugin's device, its warnings.
func (b *Backend) parse(req backend.LoadRequest) (engine.Options, Attach, []string, error) {
	var none engine.Options
	switch {
	case req.ModelPath == "":
		return none, nil, nil, backend.Errorf(backend.ErrInvalidArgument, "load: model_path is empty")
	case req.Threads < 0:
		return none, nil, nil, backend.Errorf(backend.ErrInvalidArgument, "load: threads %d is negative", req.Threads)
	case req.NCtx < 0:
		return none, nil, nil, backend.Errorf(backend.ErrInvalidArgument, "load: n_ctx %d is negative", req.NCtx)
	}
	var engineOpts engineOptions
	dsts := []any{&engineOpts}
	own := b.cfg.Options.newOptions()
	if own != nil {
		dsts = append(dsts, own)
	}
	if err := optdecode.Decode(req.Options, dsts...); err != nil {
		return none, nil, nil, backend.Errorf(backend.ErrInvalidArgument, "%v", err)
	}
	opts, err := engineOpts.engine()
	if err != nil {
		return none, nil, nil, err
	}
	attach, warnings, err := b.cfg.Options.prepare(own, req.BaseDir)
	if err != nil {
		return none, nil, nil, backend.Errorf(backend.ErrInvalidArgument, "%v", err)
	}
	opts.Threads = req.Threads
	if opts.Weights == engine.WeightsAuto && b.cfg.MapWeights {
		opts.Weights = engine.WeightsMmap
	}
	return opts, attach, warnings, nil
}

// Validate implements backend.Validator: the request and options as Load
// checks them (files the options name included), and the model's
// hyperparameters and tensors as the engine binds them (engine.Check: the
// file is mapped, nothing is loaded or computed), so a model the engine
// does not compute is refused by name before any plugin loads.
func (b *Backend) Validate(_ context.Context, req backend.LoadRequest) ([]string, error) {
	_, _, warnings, err := b.parse(req)
	if err != nil {
		return warnings, err
	}
	return warnings, checkModel(req.ModelPath)
}

// checkModel is engine.Check of the file at path.
func checkModel(path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return loadError(path, err)
	}
	defer f.Close()
	if _, err := engine.Check(f); err != nil {
		return backend.Errorf(backend.ErrInvalidArgument, "model %v", err)
	}
	// Load builds the tokenizer too (the vocabulary digest is checked then).
	if _, err := tokenizer.FromGGUF(f); err != nil {
		return backend.Errorf(backend.ErrInvalidArgument, "model %v", err)
	}
	return nil
}

// Load implements backend.Backend. Loading again replaces the model and drops
// every session.
func (b *Backend) Load(ctx context.Context, req backend.LoadRequest) (backend.LoadResult, error) {
	opts, attach, _, err := b.parse(req)
	if err != nil {
		return backend.LoadResult{}, err
	}
	start := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeLocked()
	if err := ctx.Err(); err != nil { // the host gave up while we waited
		return backend.LoadResult{}, err
	}
	m, err := engine.Open(req.ModelPath, opts)
	if err != nil {
		return backend.LoadResult{}, loadError(req.ModelPath, err)
	}
	if err := checkVocab(m, req.VocabDigest); err != nil {
		m.Close()
		return backend.LoadResult{}, err
	}
	plan, summary := cpuPlan(m)
	var device Device
	if attach != nil {
		if device, err = attach(m); err != nil {
			m.Close()
			return backend.LoadResult{}, fmt.Errorf("load %s: %s: %w", req.ModelPath, b.cfg.Name, err)
		}
		m.UseMatMul(device)
		plan, summary = device.Plan()
	}
	loadNS := time.Since(start).Nanoseconds()

	// Warm-up: one token through every matmul, so lazy device preparation
	// (weight conversion, kernel setup) is paid here, not in the first Eval.
	start = time.Now()
	warm := m.NewSession(1)
	if err := warm.Decode([]int32{warmupToken(m)}, nil, func(int, []float32) error { return nil }); err != nil {
		if device != nil {
			device.Close()
		}
		m.Close()
		return backend.LoadResult{}, fmt.Errorf("load %s: warm-up: %w", req.ModelPath, err)
	}
	warmupNS := time.Since(start).Nanoseconds()
	if a, ok := device.(Armer); ok {
		a.Arm()
	}

	b.model, b.device, b.nCtx, b.sessions = m, device, req.NCtx, map[string]*engine.Session{}
	sim, ok := device.(Simulator)
	b.simulated.Store(ok && sim.Simulated())
	if b.nCtx == 0 {
		b.nCtx = m.Config.NCtxTrain
	}
	res := backend.LoadResult{
		Model:       modelInfo(m),
		Plan:        plan,
		PlanSummary: summary,
		LoadNS:      loadNS,
		WarmupNS:    warmupNS,
		MemoryBytes: backend.ResidentBytes(),
		Kernels:     m.Kernels().Name(),
	}
	b.cfg.Logger.Info("model loaded", "path", req.ModelPath, "numerics", opts.Numerics.String(), "kv_cache", opts.KVCache.String(), "weights", weightsName(m), "threads", m.Threads(),
		"n_ctx", b.nCtx, "plan", summary, "kernels", res.Kernels, "load_ms", loadNS/1e6, "warmup_ms", warmupNS/1e6)
	return res, nil
}

// weightsName says how the model's weights came into memory.
func weightsName(m *engine.Model) string {
	if m.File().Copied() {
		return "copy"
	}
	return "mmap"
}

// loadError keeps "file not found" recognizable across the plugin boundary.
func loadError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return err
	}
	if errors.Is(err, engine.ErrKVCache) {
		return backend.Errorf(backend.ErrInvalidArgument, "option \"kv_cache\": %v", err)
	}
	if _, statErr := os.Stat(path); statErr != nil {
		return statErr
	}
	if strings.Contains(err.Error(), path) { // the engine's errors name the file
		return backend.Errorf(backend.ErrInvalidArgument, "%v", err)
	}
	return backend.Errorf(backend.ErrInvalidArgument, "load %s: %v", path, err)
}

// checkVocab refuses a model whose vocabulary is not the host's ("" = the
// host did not say).
func checkVocab(m *engine.Model, want string) error {
	if want == "" {
		return nil
	}
	tok := m.Tokenizer()
	if tok == nil {
		return backend.Errorf(backend.ErrInvalidArgument, "load: the host sent a vocabulary digest but the model has no tokenizer")
	}
	if got := backend.VocabDigest(tok.VocabSize(), func(id int) string { return tok.Token(int32(id)) }); got != want {
		return backend.Errorf(backend.ErrInvalidArgument,
			"load: the model's vocabulary (%d tokens, digest %.12s) is not the one the host tokenizes with (digest %.12s): the same ids would mean different text",
			tok.VocabSize(), got, want)
	}
	return nil
}

// cpuPlan is the plan when every matmul stays on the CPU.
func cpuPlan(m *engine.Model) ([]backend.PlanEntry, string) {
	ops := m.MatMulOps(1)
	plan := make([]backend.PlanEntry, len(ops))
	for i, op := range ops {
		plan[i] = backend.PlanEntry{Op: op.Name, Device: "cpu", Shape: Shape(op)}
	}
	return plan, fmt.Sprintf("all %d matmuls on the CPU", len(ops))
}

// Shape formats a matmul's shape the way plans show it: "T×K×N".
func Shape(op engine.MatMulOp) string { return fmt.Sprintf("%d×%d×%d", op.T, op.K, op.N) }

// warmupToken is BOS when the vocabulary has one, else token 0.
func warmupToken(m *engine.Model) int32 {
	if t := m.Tokenizer(); t != nil && t.BOS() != tokenizer.None && int(t.BOS()) < m.Config.NVocab {
		return t.BOS()
	}
	return 0
}

// Eval implements backend.Backend. A failed Eval leaves the session where it
// was before the call.
func (b *Backend) Eval(ctx context.Context, req backend.EvalRequest, emit func(backend.Logits) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.model == nil {
		return backend.Errorf(backend.ErrNotLoaded, "eval: no model loaded (call Load first)")
	}
	s := b.sessions[req.Session]
	if s == nil {
		s = b.model.NewSession(b.nCtx)
	}
	start := s.Pos()
	switch {
	case req.Pos == -1:
	case req.Pos < -1 || req.Pos > s.Pos():
		return backend.Errorf(backend.ErrInvalidArgument, "eval: pos %d outside -1..%d for session %q", req.Pos, s.Pos(), req.Session)
	default:
		start = req.Pos
	}
	n := len(req.Tokens)
	if req.LogitsFrom < 0 || req.LogitsFrom > n {
		return backend.Errorf(backend.ErrInvalidArgument, "eval: logits_from %d outside 0..%d", req.LogitsFrom, n)
	}
	if start+n > b.nCtx {
		return backend.Errorf(backend.ErrInvalidArgument, "eval: %d tokens at position %d exceed the context of %d (n_ctx)", n, start, b.nCtx)
	}
	nVocab := b.model.Config.NVocab
	for i, t := range req.Tokens {
		if t < 0 || int(t) >= nVocab {
			return backend.Errorf(backend.ErrInvalidArgument, "eval: token %d at index %d outside the vocabulary [0, %d)", t, i, nVocab)
		}
	}
	hidden, err := b.hiddenRows(req, n)
	if err != nil {
		return err
	}
	s.Truncate(start)
	b.sessions[req.Session] = s
	if hidden != nil {
		defer s.SetLayerHook(nil)
	}

	for lo := 0; lo < n; lo += EvalBatch {
		hi := min(lo+EvalBatch, n)
		if err := ctx.Err(); err != nil {
			s.Truncate(start)
			return err
		}
		if hidden != nil {
			s.SetLayerHook(hidden.hook(lo))
		}
		err := s.Decode(req.Tokens[lo:hi], func(i int) bool { return lo+i >= req.LogitsFrom }, func(i int, logits []float32) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return emit(backend.Logits{Index: lo + i, Pos: start + lo + i, Values: logits, Hidden: hidden.of(lo + i)})
		})
		if err != nil {
			s.Truncate(start)
			return err
		}
	}
	return nil
}

// hiddenRows checks req.HiddenRows and returns where their hidden states
// are collected (nil: none asked for).
func (b *Backend) hiddenRows(req backend.EvalRequest, n int) (*hiddenStates, error) {
	if len(req.HiddenRows) == 0 {
		return nil, nil
	}
	c := b.model.Config
	h := &hiddenStates{nEmbd: c.NEmbd, nLayer: c.NLayer, rows: map[int][]float32{}}
	for _, r := range req.HiddenRows {
		if r < req.LogitsFrom || r >= n {
			return nil, backend.Errorf(backend.ErrInvalidArgument, "eval: hidden row %d outside the logits rows %d..%d", r, req.LogitsFrom, n-1)
		}
		h.rows[r] = make([]float32, c.NLayer*c.NEmbd)
	}
	return h, nil
}

// hiddenStates collects the residual stream after every layer for the
// rows of an Eval that asked for it.
type hiddenStates struct {
	nEmbd, nLayer int
	rows          map[int][]float32 // by index into the request's tokens
}

// hook is the session's layer hook for the batch starting at token lo.
func (h *hiddenStates) hook(lo int) func(il int, rows []int, x []float32) {
	return func(il int, rows []int, x []float32) {
		for r, i := range rows {
			if dst, ok := h.rows[lo+i]; ok {
				copy(dst[il*h.nEmbd:(il+1)*h.nEmbd], x[r*h.nEmbd:(r+1)*h.nEmbd])
			}
		}
	}
}

// of returns row i's states, or nil when it was not asked for.
func (h *hiddenStates) of(i int) []float32 {
	if h == nil {
		return nil
	}
	return h.rows[i]
}

// Diagnoser is a Device that reports diagnostics (backend.Diagnoser).
type Diagnoser interface {
	Diagnostics() *backend.Diagnostics
}

// Diagnostics implements backend.Diagnoser through the device; a plugin
// whose device has none answers ErrUnsupported.
func (b *Backend) Diagnostics(context.Context) (*backend.Diagnostics, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.model == nil {
		return nil, backend.Errorf(backend.ErrNotLoaded, "diagnostics: no model loaded (call Load first)")
	}
	d, ok := b.device.(Diagnoser)
	if !ok {
		return nil, backend.Errorf(backend.ErrUnsupported, "diagnostics: the %s plugin's device reports none", b.cfg.Name)
	}
	return d.Diagnostics(), nil
}

// Close implements backend.Backend.
func (b *Backend) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closeLocked()
}

func (b *Backend) closeLocked() error {
	if b.model == nil {
		return nil
	}
	err := b.model.Close()
	if b.device != nil {
		// Release the device's contexts and memory too (on a board they
		// outlive the process's Go heap).
		if derr := b.device.Close(); err == nil {
			err = derr
		}
	}
	b.model, b.device, b.sessions = nil, nil, nil
	return err
}
