// Package pipeline is the evalrun host: it turns an experiment spec into a
// plan, drives the backend plugins through the accuracy, generation and
// throughput passes, compares their logits with the reference as they
// stream in, and writes the results and the verdict.
//
// The stages have one owner each: package spec reads the file (its types
// are the plan's), plan.New checks it against the model and tokenizes, Run
// drives the backends (runBackend, stream.Call), compares (verdict.Comparison)
// and decides (finish, verdict.Builder), and the CLI maps the outcome to exitcode codes.
package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/diag"
	"github.com/evalrun/evalrun/pipeline/kldbase"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/refcache"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/stream"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/pipeline/verdict"
)

// RelativeGates checks a finished candidate's gates against a baseline run
// (runcompare.Gates).
type RelativeGates = verdict.RelativeGates

// Options are the host-side settings of a run that are not part of the spec.
type Options struct {
	OutDir    string    // results directory; overrides the spec's output.dir/<run-id>, and then no index.jsonl is written
	PluginDir string    // where plugins are looked up first; overrides the spec
	Stderr    io.Writer // progress and plugin logs
	// Progress shows the passes as they go; nil = one line per pass on
	// Stderr (ProgressLines).
	Progress  *Progress
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
	// Force overwrites the results of an earlier run in OutDir (which is
	// otherwise refused: a run's results are not lost by accident).
	Force bool
	// RelativeGates checks the relative gates against the baseline run;
	// nil when there is none, and then a spec with relative gates is refused.
	RelativeGates RelativeGates
	// Shard runs only this shard's units (package resultsdir); nil runs all.
	Shard *resultsdir.Shard
	// Resume continues the interrupted run in OutDir: its completed units
	// are kept, the others run.
	Resume bool
}

// Run executes a planned experiment. A returned error means the run could
// not start or its results could not be written: an *exitcode.InputError (exit code
// 2: the results directory, a plugin refusing its options or the model) or
// another error (exit code 3). Otherwise the verdict in the summary carries
// the exit code. Results computed before a backend failure or an
// interruption are always kept.
func Run(ctx context.Context, p *plan.Plan, opt Options) (*resultsdir.Run, error) {
	opt = opt.withDefaults()
	now := opt.Now
	s := p.Spec
	started := now()
	runID := started.UTC().Format("20060102-150405") + "-" + s.Name
	outDir := cmp.Or(opt.OutDir, filepath.Join(s.Output.Dir, runID))
	if opt.Resume && (opt.Force || opt.OutDir == "") {
		return nil, exitcode.Input("--resume continues the run in --out: it needs --out, and does not go with --force")
	}
	if err := resultsdir.Check(outDir, opt.Force || opt.Resume); err != nil {
		return nil, err
	}
	sum := &summary.Summary{
		Schema: summary.SchemaVersion,
		Run: summary.RunInfo{
			ID: runID, Name: s.Name, Spec: s.Path, Started: started.UTC(),
			EvalrunVersion: opt.Version, GitCommit: opt.GitCommit,
			Host:          summary.ThisHost(),
			EffectiveSpec: s.Effective(),
			Limit:         p.Limited(),
		},
		Model: p.Model,
	}
	r := &runner{plan: p, opt: opt, log: opt.Log, sum: sum, progress: opt.Progress}
	defer r.closeAll()
	if err := r.preflight(ctx); err != nil {
		return nil, err
	}
	for _, w := range fewRepsWarnings(p.Spec) {
		r.log.Warn(w)
	}
	unlock, err := resultsdir.Open(outDir, opt.Force)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := r.openOutputs(ctx, outDir); err != nil {
		r.promptLog.Abort()
		r.unitsOut.Abort()
		return nil, err
	}
	r.passes(ctx)
	r.closeAll() // the plugins' peak memory is read here
	r.finish(ctx, now())

	res := &resultsdir.Run{Summary: r.sum, Dir: outDir}
	// Every file is committed; the first error is reported.
	err = cmp.Or(resultsdir.WriteSummary(outDir, r.sum), r.promptLog.Commit(), r.unitsOut.Commit(!r.interrupted))
	if err != nil {
		return res, fmt.Errorf("writing results to %s: %w", outDir, err)
	}
	// The index belongs to the results root: a run given its own directory
	// (--out) writes nothing outside it.
	if opt.OutDir == "" {
		if err := resultsdir.AppendIndex(outDir, r.sum); err != nil {
			return res, fmt.Errorf("results index: %w", err)
		}
	}
	return res, nil
}

func (opt Options) withDefaults() Options {
	opt.Stderr = cmp.Or(opt.Stderr, io.Writer(os.Stderr))
	if opt.Log == nil {
		opt.Log = slog.New(slog.NewTextHandler(opt.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if opt.Launch == nil {
		opt.Launch = LaunchPlugin
	}
	if opt.Progress == nil {
		opt.Progress = NewProgress(opt.Stderr, ProgressLines)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return opt
}

// Validate is the preflight of Run alone (evalrun validate): every plugin
// found, started and asked to validate its options (paths in them resolved
// against the spec's directory); nothing loads or computes. It returns the
// plugins' warnings, "backend: warning". A problem with the input is an
// *exitcode.InputError; a plugin that could not start another error.
func Validate(ctx context.Context, p *plan.Plan, opt Options) ([]string, error) {
	opt = opt.withDefaults()
	r := &runner{plan: p, opt: opt, log: opt.Log, sum: &summary.Summary{}, progress: opt.Progress}
	defer r.closeAll()
	if err := r.preflight(ctx); err != nil {
		return nil, err
	}
	warnings := fewRepsWarnings(p.Spec)
	for _, rb := range r.backends() {
		if st, err := rb.statusErr(); st != summary.StatusOK {
			return warnings, fmt.Errorf("%s %s: %w", rb.Name, st, err)
		}
		for _, w := range rb.warnings {
			warnings = append(warnings, rb.Name+": "+w)
		}
	}
	return warnings, ctx.Err()
}

// fewRepsWarnings names the slowdown gates that the bench's repetitions
// can never fail by a significant slowdown (they fail as not measured).
func fewRepsWarnings(s *spec.Spec) []string {
	least := speedstat.MinRepsCompare(speedstat.Alpha)
	if !s.Bench.Enabled || s.Bench.Reps >= least {
		return nil
	}
	var out []string
	for _, b := range s.Backends() {
		for _, g := range b.Gates.Slowdowns() {
			out = append(out, fmt.Sprintf("%s: gate %s: bench.reps is %d, and the p95 test needs >= %d repetitions a side to find a slowdown: the gate will fail as not measured (unless skipped: a simulated device without speed_gates_on_simulated)", b.Name, g.Name, s.Bench.Reps, least))
		}
	}
	return out
}

// runner holds the state of one run.
type runner struct {
	plan     *plan.Plan
	opt      Options
	log      *slog.Logger
	sum      *summary.Summary
	progress *Progress

	ref   *runBackend // nil when the reference is a kld_base file
	base  *kldbase.Reader
	cands []*candidate

	mu        sync.Mutex
	promptLog *atomicfile.Lines // prompts.jsonl, streamed

	cache    *refcache.Cache    // reference logits kept between runs; nil: none
	owned    map[string]bool    // a shard's units, or a resumed run's units left; nil: every unit
	unitsOut *resultsdir.Writer // the units file

	refTput     *summary.Throughput
	problems    []string // run-level failures for the verdict (outputs not written)
	interrupted bool
	timing      summary.HostTiming
	genFirst    *genStep // the first generate step, started by the score pass
	closeOnce   sync.Once
}

// candidate is a backend under test with its accumulated comparison.
type candidate struct {
	rb   *runBackend
	cmp  *verdict.Comparison
	tput *summary.Throughput
	diag *diag.Report // device diagnostics (nil: the plugin has none)
}

// openOutputs starts the streamed result files (prompts.jsonl, the units
// file), takes over an interrupted run's units (resume) and loads every
// backend.
func (r *runner) openOutputs(ctx context.Context, outDir string) (err error) {
	if formats := r.plan.Spec.Output.Formats; len(formats) == 0 || slices.Contains(formats, "jsonl") {
		if r.promptLog, err = atomicfile.CreateLines(filepath.Join(outDir, resultsdir.PromptsFile)); err != nil {
			return &exitcode.InputError{Err: fmt.Errorf("results directory %s: %w", outDir, err)}
		}
	}
	if err := r.startShard(outDir); err != nil {
		return err
	}
	if r.opt.Resume {
		if err := r.resumeFrom(outDir); err != nil {
			return err
		}
	}
	return r.loadBackends(ctx)
}

// preflight is what Run and Validate share: the checks made before any
// plugin starts, a kld_base reference and the cache opened, and every
// plugin started and asked to validate its Load.
func (r *runner) preflight(ctx context.Context) error {
	p, s := r.plan, r.plan.Spec
	if r.opt.RelativeGates == nil {
		for _, b := range s.Backends() {
			if rel := b.Gates.BaselineRun(); len(rel) > 0 {
				return &exitcode.InputError{Err: s.Err(b.Key+".gates", "%s: gate %s compares with a baseline run: set baseline: in the spec or --baseline", b.Name, rel[0].Name)}
			}
		}
	}
	for _, d := range p.Datasets {
		r.sum.Datasets = append(r.sum.Datasets, d.Summary())
	}
	if path := p.Spec.Reference.KLDBase; path != "" {
		b, err := kldbase.Open(path)
		if err != nil {
			return &exitcode.InputError{Err: err}
		}
		r.base = b
		switch {
		case b.NVocab() != p.Model.NVocab:
			return exitcode.Input("reference kld_base %s: n_vocab %d differs from the model's %d", path, b.NVocab(), p.Model.NVocab)
		case b.NCtx() > p.NCtxTrain:
			return exitcode.Input("reference kld_base %s: n_ctx %d exceeds the model's context_length %d", path, b.NCtx(), p.NCtxTrain)
		}
		r.sum.Datasets = append(r.sum.Datasets, summary.DatasetSummary{
			Name: "kld_base", Path: path, Mode: string(spec.ModeScore),
			Tokens: len(b.Tokens()), Chunks: b.NChunk(), NCtx: b.NCtx(), Scored: b.NChunk() * kldbase.PerChunk(b.NCtx()),
		})
	}
	if err := r.openCache(); err != nil {
		return err
	}
	return r.startBackends(ctx)
}

// startBackends launches the reference and every candidate at once and has
// each validate its Load (the preflight: nothing computes yet); the loads
// come after, one at a time.
func (r *runner) startBackends(ctx context.Context) error {
	p := r.plan
	l := Launch{PluginDirs: []string{r.opt.PluginDir, p.Spec.PluginDir}, Logger: r.log,
		Stderr: r.opt.PluginStderr, StartTimeout: p.Spec.Timeouts.Start}
	nCtx := p.MaxContext()
	if r.base != nil {
		nCtx = max(nCtx, r.base.NCtx())
	}
	pool := streamBuffer + 2
	if ok, rows := r.prefetch(); ok {
		pool = max(pool, rows+2)
	}
	for _, b := range p.Spec.Backends() {
		rb := &runBackend{Backend: b, log: r.log, timeouts: p.Spec.Timeouts, nVocab: p.Model.NVocab,
			status: summary.StatusOK, rows: stream.NewPool(pool),
			req: backend.LoadRequest{ModelPath: b.Model, Threads: b.Threads, NCtx: nCtx, Options: b.Options,
				VocabDigest: p.VocabDigest, BaseDir: p.Spec.Dir}}
		if b.Key == "reference" {
			r.ref = rb
		} else {
			r.cands = append(r.cands, &candidate{rb: rb, cmp: &verdict.Comparison{}})
		}
	}
	backends := r.backends()
	errs := make([]error, len(backends))
	var wg sync.WaitGroup
	for i, rb := range backends {
		wg.Go(func() { errs[i] = rb.start(ctx, p.Spec, r.opt.Launch, l) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadBackends loads the model in every started plugin, the reference
// first; without a reference the candidates are skipped.
func (r *runner) loadBackends(ctx context.Context) error {
	// The host's rows are made while the plugins load, not in the passes.
	var fill sync.WaitGroup
	defer fill.Wait()
	held := r.heldRows()
	for _, rb := range r.liveBackends() {
		fill.Go(func() { rb.rows.Fill(held, rb.nVocab) })
	}
	for _, rb := range r.backends() {
		if r.ref != nil && rb != r.ref && !r.ref.ok() {
			rb.status, rb.err = summary.StatusSkipped, errors.New("the reference backend could not run")
			continue
		}
		if ctx.Err() != nil || !rb.ok() {
			continue
		}
		if err := rb.loadModel(ctx, r.plan.Spec); err != nil {
			return err
		}
	}
	return nil
}

// heldRows is how many rows a backend holds at most in the passes: two
// score chunks' when the host prefetches them (one when there is one), else
// a call's buffer; and two more.
func (r *runner) heldRows() int {
	chunks := 0
	for _, c := range r.scoreChunks() {
		if r.mine(chunkUnit(c)) {
			chunks++
		}
	}
	ok, rows := r.prefetch()
	if !ok || chunks == 0 {
		return streamBuffer + 2
	}
	return max(streamBuffer, min(chunks, 2)*rows/2) + 2
}

// liveBackends are the backends still running, reference first.
func (r *runner) liveBackends() []*runBackend {
	return slices.DeleteFunc(r.backends(), func(rb *runBackend) bool { return !rb.ok() })
}

func (r *runner) liveCands() []*candidate {
	return slices.DeleteFunc(slices.Clone(r.cands), func(c *candidate) bool { return !c.rb.ok() })
}

func (r *runner) refOK() bool { return r.base != nil || r.ref.ok() }

// passes runs the score, generate and bench passes, stopping at an
// interruption, and then collects the device diagnostics.
func (r *runner) passes(ctx context.Context) {
	if !r.refOK() || ctx.Err() != nil {
		return
	}
	start := time.Now()
	cpu0, cpuOK := processCPU()
	r.scorePass(ctx)
	if r.ref != nil && r.ref.ok() && ctx.Err() == nil {
		r.generatePass(ctx)
	}
	r.genFirst.abandon() // started for a generate pass that did not run
	r.genFirst = nil
	r.timing.PassesS = time.Since(start).Seconds()
	if cpu1, ok := processCPU(); ok && cpuOK {
		v := (cpu1 - cpu0).Seconds()
		r.timing.HostCPUS = &v
	}
	if r.plan.Spec.Bench.Enabled && ctx.Err() == nil {
		r.benchPass(ctx)
	}
	r.diagnose(ctx)
}

// round books one lockstep round of calls: its cost on the critical path is
// the slowest call's compute inside its plugin.
func (r *runner) round(streams ...*stream.Call) {
	slowest := int64(0)
	for _, s := range streams {
		slowest = max(slowest, s.Compute())
	}
	r.timing.ComputeS += float64(slowest) / 1e9
}

// compared books the time since t0, spent comparing a candidate's row.
func (r *runner) compared(t0 time.Time) {
	r.mu.Lock()
	r.timing.MetricsS += time.Since(t0).Seconds()
	r.mu.Unlock()
}

func (r *runner) closeAll() {
	r.closeOnce.Do(func() {
		for _, rb := range r.backends() {
			rb.close()
		}
		backend.EndOrphans() // what the plugins detached and left behind
		if r.base != nil {
			r.base.Close()
		}
	})
}

// backends lists the live plugins' runBackends, reference first.
func (r *runner) backends() []*runBackend {
	var out []*runBackend
	if r.ref != nil {
		out = append(out, r.ref)
	}
	for _, c := range r.cands {
		out = append(out, c.rb)
	}
	return out
}

// finish fills the backend blocks, evaluates the gates and sets the verdict.
func (r *runner) finish(ctx context.Context, end time.Time) {
	s := r.sum
	s.Run.Finished = end.UTC()
	s.Run.DurationS = end.Sub(s.Run.Started).Seconds()
	r.interrupted = ctx.Err() != nil
	v := &verdict.Builder{Relative: r.opt.RelativeGates, LiveRef: r.base == nil}
	if s.Run.Limit > 0 {
		v.Limited(s.Run.Limit)
	}
	if sh := r.shard(); sh.Total > 1 {
		units := r.planUnits()
		v.BenchedApart = func(a, b string) string { return resultsdir.BenchedApart(units, sh.Total, a, b) }
	}
	if r.base != nil {
		s.Reference = summary.BackendSummary{Name: r.plan.Spec.Reference.Name, Kind: "kld_base", Model: r.plan.Spec.Reference.KLDBase, Status: summary.StatusOK, Pass: true}
	} else {
		s.Reference = r.backendSummary(r.ref)
		s.Reference.Throughput = r.refTput
		if r.cache != nil {
			st := r.cache.Stats
			s.Reference.Cache = &st
		}
		v.Reference(&s.Reference)
	}
	v.Speeds = map[string]*summary.Throughput{s.Reference.Name: s.Reference.Throughput}
	v.Statuses = map[string]string{s.Reference.Name: s.Reference.Status}
	cands := make([]summary.BackendSummary, len(r.cands))
	for i, c := range r.cands {
		cands[i] = r.backendSummary(c.rb)
		cands[i].Throughput = c.tput
		cands[i].Diagnostics = c.diag
		v.Speeds[c.rb.Name], v.Statuses[c.rb.Name] = c.tput, cands[i].Status
	}
	for i, c := range r.cands {
		s.Backends = append(s.Backends, v.Candidate(cands[i], c.cmp, c.rb.Gates))
	}
	if r.timing.PassesS > 0 {
		t := r.timing
		for _, rb := range r.backends() {
			t.DecodeS += rb.eval.DecodeS
		}
		t.SetHostIPC()
		s.Host = &t
	}
	if len(r.problems) > 0 {
		v.Error(r.problems...)
	}
	if r.interrupted {
		v.Error("the run was interrupted")
	}
	s.Verdict = v.Result()
}

func (r *runner) backendSummary(rb *runBackend) summary.BackendSummary {
	b := rb.Backend
	bs := summary.BackendSummary{Name: b.Name, Plugin: cmp.Or(b.PluginPath, b.Plugin), Kind: "plugin", Model: b.Model, Threads: b.Threads, Options: b.Options}
	st, err := rb.statusErr()
	bs.Status = st
	if err != nil {
		bs.Error = err.Error()
	}
	if st == summary.StatusOK && rb.load == nil { // interrupted before it loaded
		bs.Status, bs.Error = summary.StatusSkipped, "the run was interrupted"
	}
	bs.Info, bs.Load, bs.PeakRSSBytes, bs.Digest = rb.info, rb.load, rb.peakRSS, rb.digest.Sum()
	bs.PluginSHA256 = rb.pluginSHA256
	if rb.eval.Calls > 0 {
		e := rb.eval
		if c, ok := rb.be.(interface{ SharedRows() int64 }); ok {
			e.SharedRows = c.SharedRows()
		}
		bs.Eval = &e
	}
	return bs
}
