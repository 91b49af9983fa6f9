package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/evalrun/evalrun/backend"
)

// runBackend is one live backend plugin during a run, with the status the
// run has observed for it. Once a backend leaves StatusOK it takes no further
// part, and what it computed so far stays in the summary.
type runBackend struct {
	name     string
	model    string // model path given to Load
	threads  int
	options  map[string]any
	client   Process
	be       backend.Backend
	log      *slog.Logger
	timeouts timeouts

	vocabDigest string // the host's vocabulary, checked by the plugin at Load

	mu     sync.Mutex
	status string
	err    error

	info *PluginInfo
	load *LoadSummary
}

type timeouts struct {
	start, load, eval, bench time.Duration
}

func (rb *runBackend) ok() bool {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.status == StatusOK
}

func (rb *runBackend) statusErr() (string, error) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.status, rb.err
}

// errCallTimeout marks a call that exceeded its timeout from the spec.
var errCallTimeout = errors.New("timed out")

// timedOut wraps err with errCallTimeout when the call's own deadline (not
// the run's) expired, so a hung plugin is told apart from other errors.
func timedOut(callCtx context.Context, limit time.Duration, err error) error {
	if err != nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w after %s (%v)", errCallTimeout, limit, err)
	}
	return err
}

// fail records why the backend stopped. The first failure wins; a timed-out
// or failed plugin is killed so it cannot linger.
func (rb *runBackend) fail(what string, err error) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.status != StatusOK {
		return
	}
	if errors.Is(err, context.Canceled) {
		// The run was interrupted: the backend did nothing wrong, and the
		// verdict says the run is incomplete.
		return
	}
	switch {
	case errors.Is(err, backend.ErrCrashed) || (rb.client != nil && rb.client.Exited()):
		rb.status = StatusCrashed
	case errors.Is(err, errCallTimeout):
		rb.status = StatusTimeout
	default:
		rb.status = StatusFailed
	}
	rb.err = fmt.Errorf("%s: %w", what, err)
	rb.log.Error("backend stopped", "backend", rb.name, "status", rb.status, "error", rb.err)
	if rb.client != nil && rb.status != StatusCrashed {
		rb.client.Kill()
	}
}

// Process is the handle of a running plugin process.
type Process interface {
	Exited() bool
	Kill()
}

// Launcher starts the plugin of a backend. The default finds the plugin
// binary and starts it with go-plugin; tests substitute in-process backends.
type Launcher func(ctx context.Context, b BackendPlan, pluginDirs []string, logger hclog.Logger, stderr io.Writer, startTimeout time.Duration) (backend.Backend, Process, error)

// LaunchPlugin is the default Launcher.
func LaunchPlugin(ctx context.Context, b BackendPlan, pluginDirs []string, logger hclog.Logger, stderr io.Writer, startTimeout time.Duration) (backend.Backend, Process, error) {
	path := b.Plugin
	if !strings.ContainsRune(path, '/') {
		p, err := backend.FindPlugin(b.Plugin, pluginDirs...)
		if err != nil {
			return nil, nil, err
		}
		path = p
	}
	c, err := backend.Launch(ctx, backend.LaunchConfig{Path: path, StartTimeout: startTimeout, Logger: logger, Stderr: stderr})
	if err != nil {
		return nil, nil, fmt.Errorf("start plugin %s: %w", path, err)
	}
	return c, c, nil
}

// launch starts the plugin process, asks it to describe itself and loads the
// model. Errors are recorded on rb, not returned: a backend that cannot run
// is a result.
func (rb *runBackend) launch(ctx context.Context, launcher Launcher, b BackendPlan, dirs []string, stderr io.Writer, hl hclog.Logger, nCtx int) {
	startCtx, cancel := context.WithTimeout(ctx, rb.timeouts.start)
	be, proc, err := launcher(startCtx, b, dirs, hl, stderr, rb.timeouts.start)
	if err != nil {
		rb.fail("start", timedOut(startCtx, rb.timeouts.start, err))
		cancel()
		return
	}
	rb.client = proc
	rb.be = be
	info, err := rb.be.Describe(startCtx)
	cancel()
	if err != nil {
		rb.fail("describe", timedOut(startCtx, rb.timeouts.start, err))
		return
	}
	rb.info = &PluginInfo{Name: info.Name, Version: info.Version, Device: info.Device, Capabilities: info.Capabilities}

	loadCtx, cancel := context.WithTimeout(ctx, rb.timeouts.load)
	defer cancel()
	t0 := time.Now()
	res, err := rb.be.Load(loadCtx, backend.LoadRequest{ModelPath: rb.model, Threads: rb.threads, NCtx: nCtx, Options: rb.options, VocabDigest: rb.vocabDigest})
	if err != nil {
		rb.fail("load "+rb.model, timedOut(loadCtx, rb.timeouts.load, err))
		return
	}
	ls := &LoadSummary{
		LoadS:       float64(res.LoadNS) / 1e9,
		WarmupS:     float64(res.WarmupNS) / 1e9,
		HostS:       time.Since(t0).Seconds(),
		MemoryBytes: res.MemoryBytes,
		PlanSummary: res.PlanSummary,
	}
	for _, p := range res.Plan {
		ls.Plan = append(ls.Plan, PlanEntry{Op: p.Op, Device: p.Device, Shape: p.Shape, Reason: p.Reason})
	}
	rb.load = ls
	rb.log.Info("backend loaded", "backend", rb.name, "plugin", info.Name, "device", info.Device,
		"load_s", fmt.Sprintf("%.3f", ls.LoadS), "plan", res.PlanSummary)
}

func (rb *runBackend) close(ctx context.Context) {
	if rb.client == nil {
		return
	}
	if rb.ok() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = rb.be.Close(cctx)
		cancel()
	}
	rb.client.Kill()
}

// evalStream runs one Eval call in the background and hands its rows over a
// small buffered channel, so reference and candidates advance in lockstep
// and only a few rows per backend are ever in memory.
//
// The eval timeout is measured by the consumer, as the wait for each next
// row: a plugin blocked only because the host has not yet taken its rows
// (another backend is slow) is not timed out, while a hung plugin is.
type evalStream struct {
	rb      *runBackend
	rows    chan []float32
	err     error // set before rows is closed
	cancel  context.CancelFunc
	timeout time.Duration
}

const streamBuffer = 4

func (rb *runBackend) startEval(ctx context.Context, req backend.EvalRequest) *evalStream {
	cctx, cancel := context.WithCancel(ctx)
	s := &evalStream{rb: rb, rows: make(chan []float32, streamBuffer), cancel: cancel, timeout: rb.timeouts.eval}
	go func() {
		err := rb.be.Eval(cctx, req, func(l backend.Logits) error {
			row := make([]float32, len(l.Values))
			copy(row, l.Values)
			select {
			case s.rows <- row:
				return nil
			case <-cctx.Done():
				return cctx.Err()
			}
		})
		s.err = err
		close(s.rows)
	}()
	return s
}

var errShortStream = errors.New("the plugin sent fewer logits rows than requested")

// next returns the next row, or the error that ended the stream early, or
// errCallTimeout when the plugin produced nothing for the eval timeout.
func (s *evalStream) next() ([]float32, error) {
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	select {
	case row, ok := <-s.rows:
		if ok {
			return row, nil
		}
		if s.err != nil {
			return nil, s.err
		}
		return nil, errShortStream
	case <-timer.C:
		s.cancel()
		return nil, fmt.Errorf("%w after %s waiting for the next logits row", errCallTimeout, s.timeout)
	}
}

// finish waits for the call to end and reports an error if it failed or
// sent more rows than expected.
func (s *evalStream) finish() error {
	extra := 0
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	defer s.cancel()
	for {
		select {
		case _, ok := <-s.rows:
			if ok {
				extra++
				continue
			}
			if s.err != nil {
				return s.err
			}
			if extra > 0 {
				return fmt.Errorf("the plugin sent %d more logits rows than requested", extra)
			}
			return nil
		case <-timer.C:
			return fmt.Errorf("%w after %s waiting for the end of the call", errCallTimeout, s.timeout)
		}
	}
}

// abandon stops a stream whose rows are no longer wanted, without waiting
// for a hung plugin.
func (s *evalStream) abandon() {
	s.cancel()
	go func() {
		for range s.rows {
		}
	}()
}
