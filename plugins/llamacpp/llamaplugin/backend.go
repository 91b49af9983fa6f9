// Package llamaplugin implements backend.Backend on a real llama.cpp build
// (package llama binds it without cgo). Tokenization stays on the host: the
// plugin checks that libllama reads the host's vocabulary, then feeds the
// host's token ids through llama_decode.
//
// Concurrency: one llama_context serves every session (one KV-cache stream
// per session), so all calls except Describe are serialized.
package llamaplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/plugins/llamacpp/llama"
)

// MaxSessions is how many Eval sessions keep their KV cache at once; a new
// session beyond it takes the cache stream of the least recently used one.
const MaxSessions = 4

// UBatch is the most tokens one llama_decode takes (llama.cpp's default
// n_batch = n_ubatch in the goldens); longer Evals are decoded in chunks,
// and a cancelled call stops between them.
const UBatch = 512

// Config describes the plugin.
type Config struct {
	Name, Version string
	Logger        hclog.Logger
}

// Backend drives libllama.
type Backend struct {
	cfg Config

	mu       sync.Mutex
	lib      *llama.Library
	model    *llama.Model
	ctx      *llama.Context
	opts     *Options
	threads  int
	nCtx     int
	info     backend.ModelInfo
	sessions map[string]*session
	evicted  map[string]bool // sessions whose cache stream was taken
	clock    uint64          // for least-recently-used eviction
	evals    int             // Eval calls since Load (fault injection)
}

type session struct {
	seq     int32
	pos     int // tokens in the cache
	lastUse uint64
}

var _ backend.Backend = (*Backend)(nil)

// New returns an unloaded Backend.
func New(cfg Config) *Backend {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Backend{cfg: cfg}
}

// Describe implements backend.Backend. Before Load no library is loaded
// (Load's lib_dir chooses it), so the llama.cpp facts appear once loaded and
// always in LoadResult.PlanSummary.
func (b *Backend) Describe(context.Context) (backend.Info, error) {
	info := backend.Info{Name: b.cfg.Name, Version: b.cfg.Version, Device: "llama.cpp", Capabilities: []string{"eval", "bench", "sessions"}}
	lib := llama.Loaded()
	if lib == nil {
		return info, nil
	}
	info.Version = fmt.Sprintf("%s; llama.cpp %s (%s), ggml %s", b.cfg.Version, lib.Version, lib.Commit, lib.GGML)
	info.Device = deviceSummary(lib)
	info.Capabilities = append(info.Capabilities, "layout:"+lib.Layout.Name, "cpu_variant:"+lib.CPUVariant)
	for _, d := range lib.Devices {
		info.Capabilities = append(info.Capabilities, fmt.Sprintf("device:%s (%s, %s: %s)", d.Name, d.Type, d.Backend, d.Description))
	}
	return info, nil
}

// deviceSummary is e.g. "CPU zen4" or "CPU zen4 + RKNN".
func deviceSummary(lib *llama.Library) string {
	var parts []string
	for _, d := range lib.Devices {
		if d.Type == "cpu" {
			parts = append(parts, d.Name+" "+lib.CPUVariant)
		} else {
			parts = append(parts, d.Name)
		}
	}
	return "llama.cpp " + strings.Join(parts, " + ")
}

// parse checks a LoadRequest and its options and finds the library
// directory (a relative lib_dir starts at the spec's directory).
func parse(req backend.LoadRequest) (*Options, string, error) {
	switch {
	case req.ModelPath == "":
		return nil, "", backend.Errorf(backend.ErrInvalidArgument, "load: model_path is empty")
	case req.Threads < 0:
		return nil, "", backend.Errorf(backend.ErrInvalidArgument, "load: threads %d is negative", req.Threads)
	case req.NCtx < 0:
		return nil, "", backend.Errorf(backend.ErrInvalidArgument, "load: n_ctx %d is negative", req.NCtx)
	}
	opts, err := parseOptions(req.Options)
	if err != nil {
		return opts, "", err
	}
	if opts.LibDir != "" && req.BaseDir != "" && !filepath.IsAbs(opts.LibDir) {
		opts.LibDir = filepath.Join(req.BaseDir, opts.LibDir)
	}
	if opts.LibDir != "" && !isDir(opts.LibDir) {
		return nil, "", backend.Errorf(backend.ErrInvalidArgument, "option \"lib_dir\": %s: not a directory", opts.LibDir)
	}
	dir, err := resolveLibDir(opts.LibDir)
	return opts, dir, err
}

// Validate implements backend.Validator: the options and the library
// directory, without loading the library or the model.
func (b *Backend) Validate(_ context.Context, req backend.LoadRequest) ([]string, error) {
	_, _, err := parse(req)
	return nil, err
}

// Load implements backend.Backend. Loading again replaces the model and
// drops every session; the library stays (one per process).
func (b *Backend) Load(ctx context.Context, req backend.LoadRequest) (backend.LoadResult, error) {
	opts, dir, err := parse(req)
	if err != nil {
		return backend.LoadResult{}, err
	}
	if _, err := os.Stat(req.ModelPath); err != nil {
		return backend.LoadResult{}, err // keeps fs.ErrNotExist recognizable
	}
	if err := ctx.Err(); err != nil {
		return backend.LoadResult{}, err
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeLocked()

	start := time.Now()
	lib, err := llama.Open(dir, opts.CPUVariant)
	if err != nil {
		return backend.LoadResult{}, backend.Errorf(backend.ErrUnsupported, "load: llama.cpp in %s: %v", dir, err)
	}
	var mp llama.ModelParams
	if opts.NGPULayers != nil {
		n := int32(*opts.NGPULayers)
		mp.NGPULayers = &n
	}
	mp.Devices = opts.Devices
	m, err := lib.LoadModel(req.ModelPath, mp)
	if err != nil {
		return backend.LoadResult{}, backend.Errorf(backend.ErrInvalidArgument, "load %s: %v", req.ModelPath, err)
	}
	if err := checkVocab(m, req.ModelPath, req.VocabDigest); err != nil {
		m.Free()
		return backend.LoadResult{}, err
	}
	threads := opts.Threads
	if threads == 0 {
		threads = req.Threads
	}
	if threads == 0 {
		threads = 4 // GGML_DEFAULT_N_THREADS
	}
	nCtx := req.NCtx
	if nCtx == 0 {
		nCtx = m.NCtxTrain()
	}
	c, err := m.NewContext(llama.ContextParams{
		// One KV-cache stream of nCtx cells per session (kv_unified off
		// splits n_ctx evenly over n_seq_max).
		NCtx: nCtx * MaxSessions, NBatch: UBatch, NUBatch: UBatch, NSeqMax: MaxSessions,
		Threads: threads, FlashAttn: opts.flashAttn, TypeK: opts.kvType, TypeV: opts.kvType, SWAFull: opts.SWAFull,
	})
	if err != nil {
		m.Free()
		return backend.LoadResult{}, backend.Errorf(backend.ErrInvalidArgument, "load %s: %v (%s)", req.ModelPath, err, describeOptions(opts))
	}
	loadNS := time.Since(start).Nanoseconds()

	// Warm-up: one token, so first-call costs (repacking, thread pool) are
	// paid here and not in the first Eval.
	start = time.Now()
	warm := m.BOS()
	if warm < 0 {
		warm = 0
	}
	if err := c.Decode(0, 0, []int32{warm}, func(int) bool { return true }); err != nil {
		c.Free()
		m.Free()
		return backend.LoadResult{}, fmt.Errorf("load %s: warm-up: %w", req.ModelPath, err)
	}
	c.SeqRm(0, 0, -1)
	warmupNS := time.Since(start).Nanoseconds()

	b.lib, b.model, b.ctx, b.opts, b.threads, b.nCtx = lib, m, c, opts, threads, nCtx
	b.sessions, b.evicted, b.evals = map[string]*session{}, map[string]bool{}, 0
	arch, _ := m.Meta("general.architecture")
	b.info = backend.ModelInfo{
		Arch: arch, NVocab: m.NVocab(), NParams: int64(m.NParams()), NCtxTrain: m.NCtxTrain(),
		NLayer: m.NLayer(), NEmbd: m.NEmbd(), FileType: fileType(m.Desc()), SizeBytes: int64(m.Size()),
	}
	summary := fmt.Sprintf("llama.cpp %s (%s, layout %s), %s, %s, %d threads", lib.Version, lib.Commit, lib.Layout.Name,
		strings.TrimPrefix(deviceSummary(lib), "llama.cpp "), describeOptions(opts), threads)
	b.cfg.Logger.Info("model loaded", "path", req.ModelPath, "lib_dir", lib.Dir, "summary", summary, "n_ctx", nCtx,
		"load_ms", loadNS/1e6, "warmup_ms", warmupNS/1e6)
	return backend.LoadResult{
		Model:       b.info,
		PlanSummary: summary,
		LoadNS:      loadNS,
		WarmupNS:    warmupNS,
		MemoryBytes: backend.ResidentBytes(),
		Kernels:     lib.CPUVariant,
	}, nil
}

// fileType takes llama_model_desc's ftype part ("llama ?B Q8_0" -> "Q8_0").
func fileType(desc string) string {
	f := strings.SplitN(desc, " ", 3)
	if len(f) < 3 {
		return desc
	}
	return f[2]
}

// vocabulary is what checkVocab reads of a model (llama.Model).
type vocabulary interface {
	NVocab() int
	TokenText(id int) string
}

// checkVocab refuses a model whose vocabulary, as libllama reads it, is not
// the host's. To name the first differing id it compares libllama's token
// texts with the model file's tokenizer.ggml.tokens (what the host's
// tokenizer reads).
func checkVocab(m vocabulary, path, want string) error {
	if want == "" {
		return nil
	}
	n := m.NVocab()
	got := backend.VocabDigest(n, m.TokenText)
	if got == want {
		return nil
	}
	f, err := gguf.Open(path)
	if err == nil {
		defer f.Close()
		if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok {
			for id := range min(n, len(toks)) {
				if t := m.TokenText(id); t != toks[id] {
					return backend.Errorf(backend.ErrInvalidArgument,
						"load %s: vocabulary differs from the host's: token %d is %q in libllama but %q in the model file the host tokenizes with", path, id, t, toks[id])
				}
			}
			if n != len(toks) {
				return backend.Errorf(backend.ErrInvalidArgument,
					"load %s: vocabulary differs from the host's: libllama reads %d tokens, the model file has %d (first differing id %d)", path, n, len(toks), min(n, len(toks)))
			}
		}
	}
	return backend.Errorf(backend.ErrInvalidArgument,
		"load %s: vocabulary differs from the host's: libllama reads %d tokens that equal this model file's, but the host tokenizes with another vocabulary (digest %.12s, the host's %.12s); first differing id unknown", path, n, got, want)
}

// session returns the named session, making one (and evicting the least
// recently used when all streams are taken).
func (b *Backend) session(name string) *session {
	b.clock++
	if s := b.sessions[name]; s != nil {
		s.lastUse = b.clock
		return s
	}
	used := map[int32]bool{}
	var victim string
	for n, s := range b.sessions {
		used[s.seq] = true
		if victim == "" || s.lastUse < b.sessions[victim].lastUse {
			victim = n
		}
	}
	seq := int32(-1)
	for i := range int32(MaxSessions) {
		if !used[i] {
			seq = i
			break
		}
	}
	if seq < 0 {
		seq = b.sessions[victim].seq
		delete(b.sessions, victim)
		b.evicted[victim] = true
		b.cfg.Logger.Debug("session evicted", "session", victim, "for", name)
	}
	b.ctx.SeqRm(seq, 0, -1)
	s := &session{seq: seq, lastUse: b.clock}
	b.sessions[name] = s
	return s
}

// Eval implements backend.Backend. A failed Eval leaves the session where it
// was before the call.
func (b *Backend) Eval(ctx context.Context, req backend.EvalRequest, emit func(backend.Logits) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.model == nil {
		return backend.Errorf(backend.ErrNotLoaded, "eval: no model loaded (call Load first)")
	}
	n := len(req.Tokens)
	if req.LogitsFrom < 0 || req.LogitsFrom > n {
		return backend.Errorf(backend.ErrInvalidArgument, "eval: logits_from %d outside 0..%d", req.LogitsFrom, n)
	}
	nVocab := b.info.NVocab
	for i, t := range req.Tokens {
		if t < 0 || int(t) >= nVocab {
			return backend.Errorf(backend.ErrInvalidArgument, "eval: token %d at index %d outside the vocabulary [0, %d)", t, i, nVocab)
		}
	}
	cur := 0
	if s := b.sessions[req.Session]; s != nil {
		cur = s.pos
	} else if b.evicted[req.Session] && req.Pos != 0 {
		return backend.Errorf(backend.ErrInvalidArgument, "eval: session %q lost its KV cache to newer sessions (at most %d are kept); start it again with pos 0", req.Session, MaxSessions)
	}
	start := cur
	switch {
	case req.Pos == -1:
	case req.Pos < -1 || req.Pos > cur:
		return backend.Errorf(backend.ErrInvalidArgument, "eval: pos %d outside -1..%d for session %q", req.Pos, cur, req.Session)
	default:
		start = req.Pos
	}
	if start+n > b.nCtx {
		return backend.Errorf(backend.ErrInvalidArgument, "eval: %d tokens at position %d exceed the context of %d (n_ctx)", n, start, b.nCtx)
	}
	b.evals++
	if f := b.opts.FaultAbortAfter; f > 0 && b.evals > f {
		b.cfg.Logger.Warn("fault injection: driving libllama into GGML_ASSERT", "eval", b.evals)
		b.ctx.SeqRm(MaxSessions+1000, 0, -1) // aborts inside libllama: the sequence does not exist
	}
	s := b.session(req.Session)
	delete(b.evicted, req.Session)
	// Truncate the cache to start (Pos 0 = reset).
	b.ctx.SeqRm(s.seq, start, -1)
	s.pos = start
	fail := func(err error) error {
		b.ctx.SeqRm(s.seq, start, -1)
		s.pos = start
		return err
	}
	for lo := 0; lo < n; lo += UBatch {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		hi := min(lo+UBatch, n)
		if err := b.ctx.Decode(s.seq, start+lo, req.Tokens[lo:hi], func(i int) bool { return lo+i >= req.LogitsFrom }); err != nil {
			return fail(err)
		}
		for i := max(lo, req.LogitsFrom); i < hi; i++ {
			row, err := b.ctx.Logits(i - lo)
			if err != nil {
				return fail(err)
			}
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			if err := emit(backend.Logits{Index: i, Pos: start + i, Values: row}); err != nil {
				return fail(err)
			}
		}
		s.pos = start + hi
	}
	return nil
}

// Close implements backend.Backend. The library stays loaded.
func (b *Backend) Close(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closeLocked()
	return nil
}

func (b *Backend) closeLocked() {
	if b.ctx != nil {
		b.ctx.Free()
	}
	if b.model != nil {
		b.model.Free()
	}
	b.ctx, b.model, b.sessions = nil, nil, nil
}
