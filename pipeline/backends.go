package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/internal/filehash"
	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/kldbase"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/stream"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// runBackend is one live backend plugin during a run, with the status the
// run has observed for it. Once a backend leaves summary.StatusOK it takes no further
// part, and what it computed so far stays in the summary.
type runBackend struct {
	spec.Backend
	log      *slog.Logger
	timeouts spec.Timeouts
	nVocab   int
	nLayer   int // the loaded model's, for hidden states
	req      backend.LoadRequest
	proc     Process
	// pluginSHA256 is the started binary's (LaunchPlugin's), for the summary.
	pluginSHA256 string
	be           backend.Backend
	rows         stream.Pool // recycled logits rows

	mu     sync.Mutex
	status string
	err    error

	info     *summary.PluginInfo
	warnings []string // the plugin's Validate warnings
	load     *summary.LoadSummary
	eval     summary.EvalTiming
	peakRSS  *int64
	digest   digest.RunHasher // of every chunk and prompt completed
	kldOut   *kldbase.Writer  // output.kld_base, written by the score pass
}

func (rb *runBackend) ok() bool {
	st, _ := rb.statusErr()
	return st == summary.StatusOK
}

func (rb *runBackend) statusErr() (string, error) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.status, rb.err
}

// timedOut wraps err with stream.ErrTimeout when the call's own deadline (not
// the run's) expired, so a hung plugin is told apart from other errors, in
// every RPC alike. gRPC carries the deadline to the plugin, whose side can
// end the call (RST_STREAM CANCEL) a moment before the host's timer fires:
// a call failing within deadlineSlack of its deadline timed out too.
func timedOut(callCtx context.Context, limit time.Duration, err error) error {
	if err == nil {
		return nil
	}
	deadline, ok := callCtx.Deadline()
	if errors.Is(callCtx.Err(), context.DeadlineExceeded) || (ok && callCtx.Err() == nil && time.Until(deadline) < deadlineSlack) {
		return fmt.Errorf("%w after %s (%v)", stream.ErrTimeout, limit, err)
	}
	return err
}

// deadlineSlack is how close to its deadline a failed call counts as timed
// out (see timedOut).
const deadlineSlack = 250 * time.Millisecond

// fail records why the backend stopped. The first failure wins; a timed-out
// or failed plugin is killed so it cannot linger. An error caused by the
// run being interrupted is not the backend's failure.
func (rb *runBackend) fail(ctx context.Context, what string, err error) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.status != summary.StatusOK || ctx.Err() != nil {
		return
	}
	switch {
	case errors.Is(err, backend.ErrCrashed) || (rb.proc != nil && rb.proc.Exited()):
		rb.status = summary.StatusCrashed
	case errors.Is(err, stream.ErrTimeout):
		rb.status = summary.StatusTimeout
	default:
		rb.status = summary.StatusFailed
	}
	rb.err = fmt.Errorf("%s: %w", what, err)
	rb.log.Error("backend stopped", "backend", rb.Name, "status", rb.status, "error", rb.err)
	if rb.proc != nil && rb.status != summary.StatusCrashed {
		rb.proc.Kill()
	}
}

// Process is the handle of a running plugin process.
type Process interface {
	Exited() bool
	Kill()
	PeakRSS() (bytes int64, ok bool) // peak resident set size so far
}

// Launch is what a Launcher needs besides the backend.
type Launch struct {
	PluginDirs   []string     // where plugin names are looked up first
	Logger       *slog.Logger // receives plugin log lines
	Stderr       io.Writer    // plugins' raw stderr
	StartTimeout time.Duration
}

// Launcher starts the plugin of a backend. The default, LaunchPlugin, finds
// the binary and starts it as a process; tests substitute in-process
// backends.
type Launcher func(ctx context.Context, b spec.Backend, l Launch) (backend.Backend, Process, error)

// LaunchPlugin is the default Launcher: plugin_path as given, or the plugin
// name found by backend.FindPlugin.
func LaunchPlugin(ctx context.Context, b spec.Backend, l Launch) (backend.Backend, Process, error) {
	path, err := backend.FindPlugin(cmp.Or(b.PluginPath, b.Plugin), l.PluginDirs...)
	if err != nil {
		return nil, nil, err
	}
	c, err := backend.Launch(ctx, backend.LaunchConfig{Path: path, StartTimeout: l.StartTimeout, Logger: l.Logger, Stderr: l.Stderr})
	if err != nil {
		return nil, nil, err
	}
	// Launch hashed the binary already when a lock file lists it.
	sum := c.LockedSHA256()
	if sum == "" {
		if sum, err = filehash.SHA256(ctx, path); err != nil {
			c.Kill()
			return nil, nil, err
		}
	}
	return c, pluginProcess{c, sum}, nil
}

// pluginProcess is a started plugin binary and its sha256, which the
// summary records so that compare can say a plugin changed.
type pluginProcess struct {
	*backend.Client
	sha256 string
}

func (p pluginProcess) BinarySHA256() string { return p.sha256 }

// optionRE finds the option a plugin's error names (backend's convention:
// `option "type": ...`, `unknown option "typo"`).
var optionRE = regexp.MustCompile(`option "([^"]+)"`)

// start launches the plugin and has it validate the Load it will get
// (backend.Validator; a plugin without it is checked by Load alone), before
// any plugin computes. A plugin that is not found or refuses its options is
// the user's to fix: an *exitcode.InputError at the spec's line. A plugin that cannot
// run is a result (recorded on rb).
func (rb *runBackend) start(ctx context.Context, s *spec.Spec, launcher Launcher, l Launch) error {
	startCtx, cancel := context.WithTimeout(ctx, rb.timeouts.Start)
	defer cancel()
	be, proc, err := launcher(startCtx, rb.Backend, l)
	switch {
	case errors.Is(err, backend.ErrPluginNotFound) && rb.PluginPath != "":
		return &exitcode.InputError{Err: s.Err(rb.Key+".plugin_path", "%v", err)}
	case errors.Is(err, backend.ErrPluginNotFound):
		return &exitcode.InputError{Err: s.Err(rb.Key+".plugin", "%v", err)}
	case err != nil:
		rb.fail(ctx, "start", timedOut(startCtx, rb.timeouts.Start, err))
		return nil
	}
	rb.be, rb.proc = be, proc
	if b, ok := proc.(interface{ BinarySHA256() string }); ok {
		rb.pluginSHA256 = b.BinarySHA256()
	}
	if err := rb.describe(ctx, startCtx); err != nil {
		return nil
	}
	v, ok := be.(backend.Validator)
	if !ok {
		return nil
	}
	warnings, err := v.Validate(startCtx, rb.req)
	switch {
	case errors.Is(err, backend.ErrUnsupported):
	case refused(ctx, err):
		return rb.refusal(s, "refused its options", err)
	case err != nil:
		rb.fail(ctx, "validate", timedOut(startCtx, rb.timeouts.Start, err))
	}
	for _, w := range warnings {
		rb.log.Warn(w, "backend", rb.Name)
		rb.warnings = append(rb.warnings, w)
	}
	return nil
}

// refused reports whether a plugin refused a request as bad input (an
// option, the model file), as opposed to failing.
func refused(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && (errors.Is(err, backend.ErrInvalidArgument) || errors.Is(err, fs.ErrNotExist))
}

// refusal points a plugin's refusal at the option it names (backend's
// convention: `option "type": ...`), else at the backend's model.
func (rb *runBackend) refusal(s *spec.Spec, what string, err error) error {
	key := rb.Key + ".model"
	if m := optionRE.FindStringSubmatch(err.Error()); m != nil {
		key = rb.Key + ".options." + m[1]
	} else if what == "refused its options" {
		what = "refused the model" // Validate checks the model too
	}
	return &exitcode.InputError{Err: s.Err(key, "%s %s: %v", rb.Name, what, err)}
}

// loadModel loads the model in a started plugin and checks what Load reports.
func (rb *runBackend) loadModel(ctx context.Context, s *spec.Spec) error {
	loadCtx, cancel := context.WithTimeout(ctx, rb.timeouts.Load)
	defer cancel()
	t0 := time.Now()
	res, err := rb.be.Load(loadCtx, rb.req)
	switch {
	case refused(ctx, err):
		return rb.refusal(s, "refused to load", err)
	case err != nil:
		rb.fail(ctx, "load "+rb.Model, timedOut(loadCtx, rb.timeouts.Load, err))
		return nil
	case res.Model.NVocab != rb.nVocab:
		rb.fail(ctx, "load "+rb.Model, fmt.Errorf("the plugin reads a vocabulary of %d tokens, the host's has %d", res.Model.NVocab, rb.nVocab))
		return nil
	}
	if err := checkLoad(res, time.Since(t0)); err != nil {
		rb.fail(ctx, "load "+rb.Model, err)
		return nil
	}
	rb.nLayer = res.Model.NLayer
	rb.load = &summary.LoadSummary{
		LoadS:       float64(res.LoadNS) / 1e9,
		WarmupS:     float64(res.WarmupNS) / 1e9,
		HostS:       time.Since(t0).Seconds(),
		MemoryBytes: res.MemoryBytes,
		Kernels:     res.Kernels,
		PlanSummary: res.PlanSummary,
		Plan:        res.Plan,
	}
	if n, ok := rb.proc.PeakRSS(); ok {
		rb.load.PeakRSSBytes = &n
	}
	// Some plugins only know their version and device once loaded.
	if err := rb.describe(ctx, loadCtx); err != nil {
		return nil
	}
	rb.log.Info("backend loaded", "backend", rb.Name, "plugin", rb.info.Name, "device", rb.info.Device,
		"load_s", fmt.Sprintf("%.3f", rb.load.LoadS), "kernels", res.Kernels, "plan", res.PlanSummary)
	return nil
}

// maxMemoryBytes bounds a plugin's reported memory: 1 PiB.
const maxMemoryBytes = 1 << 50

// checkLoad refuses figures no Load can have measured: a negative or
// absurd memory size, load or warm-up times below 0 or beyond the call the
// host timed (took).
func checkLoad(res backend.LoadResult, took time.Duration) error {
	switch {
	case res.MemoryBytes < 0 || res.MemoryBytes > maxMemoryBytes:
		return fmt.Errorf("the plugin reported an impossible memory size of %d bytes", res.MemoryBytes)
	case res.LoadNS < 0 || res.WarmupNS < 0 || res.LoadNS > took.Nanoseconds() || res.WarmupNS > took.Nanoseconds():
		return fmt.Errorf("the plugin reported impossible load and warm-up times (%d ns, %d ns) for a call of %d ns", res.LoadNS, res.WarmupNS, took.Nanoseconds())
	case res.Model.NLayer < 0 || res.Model.NParams < 0 || res.Model.SizeBytes < 0:
		return fmt.Errorf("the plugin reported impossible model figures (%d layers, %d parameters, %d bytes)", res.Model.NLayer, res.Model.NParams, res.Model.SizeBytes)
	}
	return nil
}

func (rb *runBackend) describe(ctx, callCtx context.Context) error {
	info, err := rb.be.Describe(callCtx)
	if err != nil {
		rb.fail(ctx, "describe", timedOut(callCtx, rb.timeouts.Start, err))
		return err
	}
	rb.info = &info
	return nil
}

// close releases the model, records the run's peak memory and kills the
// plugin and whatever it started.
func (rb *runBackend) close() {
	if rb.proc == nil {
		return
	}
	if rb.ok() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if n, ok := rb.proc.PeakRSS(); ok {
			rb.peakRSS = &n
		}
		_ = rb.be.Close(ctx)
		cancel()
	}
	rb.proc.Kill()
}

// streamBuffer is how many rows a call buffers ahead of the host, unless a
// score chunk is taken in whole.
const streamBuffer = 4

// startEval starts req on the backend; the host buffers its rows up to
// buffer deep (package stream).
func (rb *runBackend) startEval(ctx context.Context, req backend.EvalRequest, buffer int) *stream.Call {
	return stream.Start(ctx, rb.be, req, buffer, rb.streamConfig())
}

func (rb *runBackend) streamConfig() stream.Config {
	return stream.Config{Pool: rb.rows, NVocab: rb.nVocab, Timeout: rb.timeouts.Eval, Book: rb.book}
}

// computeS is the time the backend's Eval calls have spent computing (as
// the host timed the calls, for a plugin that does not report it).
func (rb *runBackend) computeS() float64 {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return cmp.Or(rb.eval.ComputeS, rb.eval.CallS)
}

// book adds a finished Eval call to the backend's timing.
func (rb *runBackend) book(t stream.Timing) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	rb.eval.Add(&summary.EvalTiming{Calls: 1, Rows: t.Rows, CallS: t.CallS, ComputeS: t.ComputeS, DecodeS: t.DecodeS})
}
