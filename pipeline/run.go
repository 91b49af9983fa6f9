// Package pipeline is the evalrun host: it turns an experiment spec into a
// plan, drives the backend plugins through the accuracy, generation and
// throughput passes, compares their logits with the reference as they
// stream in, and writes the results and the verdict.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/evalrun/evalrun/pipeline/kldbase"
)

// Options are the host-side settings of a run that are not part of the spec.
type Options struct {
	OutDir    string       // results directory; overrides the spec's output.dir/<run-id>
	PluginDir string       // where plugins are looked up first; overrides the spec
	Stdout    io.Writer    // tables
	Stderr    io.Writer    // progress and plugin logs
	Log       *slog.Logger // host log
	Version   string
	GitCommit string
	// Now is the clock (tests); nil = time.Now.
	Now func() time.Time
	// PluginStderr receives plugins' raw stderr; nil discards it (their log
	// lines reach Log anyway, and a crashed plugin's last lines are kept in
	// its error).
	PluginStderr io.Writer
	// Launch starts backends; nil = LaunchPlugin (real plugin processes).
	Launch Launcher
}

// InputError marks a problem with the user's input (spec, dataset, model
// file): exit code 2.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErr(format string, args ...any) error {
	return &InputError{fmt.Errorf(format, args...)}
}

// Result is what Run hands back to the CLI.
type Result struct {
	Summary *Summary
	Dir     string // where the results were written
}

// Run executes a planned experiment. A returned error means the run could
// not start or its results could not be written (the exit code is then 2 for
// an InputError, else 3); otherwise the verdict in the summary carries the
// exit code. Results computed before a backend failure are always kept.
func Run(ctx context.Context, p *Plan, opt Options) (*Result, error) {
	if opt.Stdout == nil {
		opt.Stdout = os.Stdout
	}
	if opt.Stderr == nil {
		opt.Stderr = os.Stderr
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.NewTextHandler(opt.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	started := now()
	runID := started.UTC().Format("20060102-150405") + "-" + p.Name
	outDir := opt.OutDir
	if outDir == "" {
		outDir = filepath.Join(p.OutputDir, runID)
	}

	host, _ := os.Hostname()
	sum := &Summary{
		Schema: SchemaVersion,
		Run: RunInfo{
			ID: runID, Name: p.Name, Spec: p.SpecPath, Started: started.UTC(),
			EvalrunVersion: opt.Version, GitCommit: opt.GitCommit,
			Host: HostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Hostname: host, GoVer: runtime.Version()},
		},
		Model: p.Model,
	}
	r := &runner{plan: p, opt: opt, log: opt.Log, sum: sum}
	defer r.closeAll(context.Background())

	if err := r.prepare(); err != nil {
		return nil, err
	}
	if len(p.Formats) == 0 || slices.Contains(p.Formats, FormatJSONL) {
		pl, err := newPromptLog(outDir)
		if err != nil {
			return nil, fmt.Errorf("results directory: %w", err)
		}
		r.promptLog = pl
	}
	r.startBackends(ctx)
	r.passes(ctx)

	r.finish(now())
	err := writeResults(outDir, r.sum, p.Formats)
	if perr := r.promptLog.commit(); err == nil {
		err = perr
	}
	if err != nil {
		return &Result{Summary: r.sum, Dir: outDir}, fmt.Errorf("writing results to %s: %w", outDir, err)
	}
	if err := printTables(opt.Stdout, r.sum); err != nil {
		return &Result{Summary: r.sum, Dir: outDir}, err
	}
	fmt.Fprintf(opt.Stdout, "\nverdict: %s (exit %d)", r.sum.Verdict.Status, r.sum.Verdict.ExitCode)
	for _, why := range r.sum.Verdict.Reasons {
		fmt.Fprintf(opt.Stdout, "\n  - %s", why)
	}
	fmt.Fprintf(opt.Stdout, "\nresults: %s\n", outDir)
	return &Result{Summary: r.sum, Dir: outDir}, nil
}

// runner holds the state of one run.
type runner struct {
	plan *Plan
	opt  Options
	log  *slog.Logger
	sum  *Summary

	ref   *runBackend // nil when the reference is a kld_base file
	base  *kldbase.Reader
	cands []*candidate

	mu        sync.Mutex
	promptLog *promptLog // prompts.jsonl, streamed

	refTput     *Throughput
	refOut      *kldbase.Writer // output.kld_base of the reference
	interrupted bool
}

// candidate is a backend under test with its accumulated comparison.
type candidate struct {
	rb      *runBackend
	cmp     *comparison
	gates   []Gate
	kldOut  string
	tput    *Throughput
	outFile *kldbase.Writer
}

func (r *runner) prepare() error {
	p := r.plan
	for _, d := range p.Datasets {
		r.sum.Datasets = append(r.sum.Datasets, d.summary())
	}
	if p.Reference.KLDBase != "" {
		b, err := kldbase.Open(p.Reference.KLDBase)
		if err != nil {
			return &InputError{err}
		}
		if b.NVocab() != p.Model.NVocab {
			b.Close()
			return inputErr("reference kld_base %s: n_vocab %d differs from the model's %d", p.Reference.KLDBase, b.NVocab(), p.Model.NVocab)
		}
		r.base = b
		r.sum.Datasets = append(r.sum.Datasets, DatasetSummary{
			Name: "kld_base", Path: p.Reference.KLDBase, Mode: "score",
			Tokens: len(b.Tokens()), Chunks: b.NChunk(), NCtx: b.NCtx(),
			Scored: b.NChunk() * (b.NCtx() - 1 - b.NCtx()/2),
		})
	}
	return nil
}

func (r *runner) newRunBackend(b BackendPlan) *runBackend {
	return &runBackend{
		name: b.Name, model: b.Model, threads: b.Threads, options: b.Options, vocabDigest: r.plan.VocabDigest,
		log: r.log, status: StatusOK, timeouts: r.plan.Timeouts,
	}
}

// startBackends launches the reference and every candidate. Launching is
// sequential so start-up logs stay readable and load times are not skewed.
func (r *runner) startBackends(ctx context.Context) {
	p := r.plan
	nCtx := p.maxContext()
	hl := newPluginLogger(r.log)
	launcher := r.opt.Launch
	if launcher == nil {
		launcher = LaunchPlugin
	}
	dirs := p.PluginDirs(r.opt.PluginDir)
	start := func(rb *runBackend, b BackendPlan) {
		rb.launch(ctx, launcher, b, dirs, r.opt.PluginStderr, hl, nCtx)
	}
	if r.base == nil {
		r.ref = r.newRunBackend(p.Reference)
		start(r.ref, p.Reference)
	}
	for _, b := range p.Candidates {
		c := &candidate{rb: r.newRunBackend(b), cmp: newComparison(), gates: b.Gates, kldOut: b.KLDBaseOut}
		r.cands = append(r.cands, c)
		if r.ref != nil && !r.ref.ok() {
			c.rb.status, c.rb.err = StatusSkipped, errors.New("the reference backend could not run")
			continue
		}
		start(c.rb, b)
	}
}

func (r *runner) liveCands() []*candidate {
	var out []*candidate
	for _, c := range r.cands {
		if c.rb.ok() {
			out = append(out, c)
		}
	}
	return out
}

func (r *runner) refOK() bool { return r.base != nil || (r.ref != nil && r.ref.ok()) }

func (r *runner) passes(ctx context.Context) {
	if !r.refOK() {
		return
	}
	if err := r.scorePass(ctx); err != nil {
		r.log.Error("score pass", "error", err)
	}
	if ctx.Err() != nil {
		r.interrupted = true
		return
	}
	if r.ref != nil && r.ref.ok() {
		if err := r.generatePass(ctx); err != nil {
			r.log.Error("generate pass", "error", err)
		}
	}
	if ctx.Err() != nil {
		r.interrupted = true
		return
	}
	if r.plan.Bench.Enabled {
		r.benchPass(ctx)
	}
	if ctx.Err() != nil {
		r.interrupted = true
	}
}

func (r *runner) closeAll(ctx context.Context) {
	if r.ref != nil {
		r.ref.close(ctx)
	}
	for _, c := range r.cands {
		c.rb.close(ctx)
	}
	if r.base != nil {
		r.base.Close()
	}
}

// finish fills the backend blocks, evaluates the gates and sets the verdict.
func (r *runner) finish(end time.Time) {
	s := r.sum
	s.Run.Finished = end.UTC()
	s.Run.DurationS = end.Sub(s.Run.Started).Seconds()

	var reasons []string
	exit := ExitPass
	errorSeen := false
	if r.base != nil {
		s.Reference = BackendSummary{Name: r.plan.Reference.Name, Kind: "kld_base", Model: r.plan.Reference.KLDBase, Status: StatusOK, Pass: true}
	} else {
		s.Reference = r.backendSummary(r.ref, r.plan.Reference)
		s.Reference.Throughput = r.refTput
		s.Reference.Pass = s.Reference.Status == StatusOK
		if !s.Reference.Pass {
			errorSeen = true
			reasons = append(reasons, fmt.Sprintf("reference %s %s: %s", s.Reference.Name, s.Reference.Status, s.Reference.Error))
		}
	}
	for i, c := range r.cands {
		bs := r.backendSummary(c.rb, r.plan.Candidates[i])
		if bs.Status != StatusSkipped && (c.cmp.compared > 0 || bs.Status == StatusOK) {
			bs.Accuracy = c.cmp.accuracy(r.base == nil)
		}
		bs.Throughput = c.tput
		if bs.Status == StatusOK {
			bs.Gates = evaluateGates(c.gates, bs.Accuracy, bs.Throughput)
			bs.Pass = true
			for _, g := range bs.Gates {
				if !g.Pass {
					bs.Pass = false
					reasons = append(reasons, fmt.Sprintf("%s: gate %s", bs.Name, g.describe()))
				}
			}
			if bs.Accuracy != nil && !bs.Accuracy.Complete {
				bs.Pass = false
				reasons = append(reasons, fmt.Sprintf("%s: only %d of %d positions were compared", bs.Name, bs.Accuracy.Tokens, c.cmp.planned))
			}
		} else {
			errorSeen = true
			reasons = append(reasons, fmt.Sprintf("%s %s: %s", bs.Name, bs.Status, bs.Error))
		}
		if !bs.Pass && exit == ExitPass {
			exit = ExitGateFailed
		}
		s.Backends = append(s.Backends, bs)
	}
	if r.interrupted {
		errorSeen = true
		reasons = append(reasons, "the run was interrupted")
	}
	switch {
	case errorSeen:
		s.Verdict = Verdict{Status: VerdictError, ExitCode: ExitBackend, Reasons: reasons}
	case exit == ExitGateFailed:
		s.Verdict = Verdict{Status: VerdictFail, ExitCode: ExitGateFailed, Reasons: reasons}
	default:
		s.Verdict = Verdict{Status: VerdictPass, ExitCode: ExitPass, Reasons: reasons}
	}
}

func (r *runner) backendSummary(rb *runBackend, b BackendPlan) BackendSummary {
	bs := BackendSummary{Name: b.Name, Plugin: b.Plugin, Kind: "plugin", Model: b.Model, Threads: b.Threads, Options: b.Options}
	if rb == nil {
		bs.Status = StatusSkipped
		return bs
	}
	st, err := rb.statusErr()
	bs.Status = st
	if err != nil {
		bs.Error = err.Error()
	}
	bs.Info = rb.info
	bs.Load = rb.load
	return bs
}
