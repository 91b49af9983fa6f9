// Merging: evalrun merge combines the results directories of a run's
// shards into the results of the whole run, from the units they recorded.

package pipeline

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"time"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/diag"
	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/pipeline/verdict"
)

// MergeOptions are the settings of evalrun merge.
type MergeOptions struct {
	Dirs         []string // the shards' results directories
	OutDir       string
	AllowPartial bool // merge although units are missing; the result is marked partial
	// RelativeGates checks relative gates against a baseline; nil refuses
	// shards of a spec that has them.
	RelativeGates RelativeGates
	Version       string
	GitCommit     string
	Now           func() time.Time // nil = time.Now
}

// Merge combines the results directories of a run's shards into the
// results of the whole run: every statistic rebuilt from the shards' units
// in plan order, so summary.json equals an unsharded run's except for
// timings and run ids, and prompts.jsonl holds the same lines. Shards of
// different specs or plugin versions, duplicate shards and (unless
// AllowPartial) missing shards are refused with an *exitcode.InputError naming them.
func Merge(opt MergeOptions) (*summary.Summary, error) {
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	var files []*resultsdir.File
	for _, dir := range opt.Dirs {
		f, err := resultsdir.ReadUnits(dir)
		if err != nil {
			return nil, &exitcode.InputError{Err: err}
		}
		files = append(files, f)
	}
	set, err := resultsdir.Collect(files, opt.AllowPartial)
	if err != nil {
		return nil, &exitcode.InputError{Err: err}
	}
	sums := map[*resultsdir.File]*summary.Summary{}
	for _, f := range files {
		s, err := resultsdir.ReadSummary(filepath.Join(f.Dir, resultsdir.SummaryFile))
		if err != nil {
			return nil, &exitcode.InputError{Err: err}
		}
		if s.Run.Shard == nil || s.Run.Shard.SpecDigest != f.Manifest.SpecDigest || (resultsdir.Shard{Index: s.Run.Shard.Index, Total: s.Run.Shard.Total}) != f.Manifest.Shard {
			return nil, exitcode.Input("%s: summary.json and %s are not of the same shard", f.Dir, resultsdir.UnitsFile)
		}
		sums[f] = s
	}
	for _, b := range set.Manifest.Backends {
		if rel := b.Gates.BaselineRun(); len(rel) > 0 && opt.RelativeGates == nil {
			return nil, exitcode.Input("backend %s: gate %s compares with a baseline run: give the merge a --baseline", b.Name, rel[0].Name)
		}
	}
	first := sums[set.Files[0]]
	for _, f := range set.Files[1:] {
		if err := samePlugins(first, sums[f], set.Files[0].Dir, f.Dir); err != nil {
			return nil, &exitcode.InputError{Err: err}
		}
	}
	if err := resultsdir.Check(opt.OutDir, false); err != nil {
		return nil, err
	}
	unlock, err := resultsdir.Open(opt.OutDir, false)
	if err != nil {
		return nil, err
	}
	defer unlock()

	m := &merger{set: set, sums: sums}
	m.readPrompts()
	s := m.summary(now().UTC(), opt)
	if err := resultsdir.WriteSummary(opt.OutDir, s); err != nil {
		return nil, fmt.Errorf("writing results to %s: %w", opt.OutDir, err)
	}
	if err := m.writePrompts(filepath.Join(opt.OutDir, resultsdir.PromptsFile)); err != nil {
		return s, fmt.Errorf("writing results to %s: %w", opt.OutDir, err)
	}
	// Like a run given --out, a merge writes nothing outside its --out: no
	// index.jsonl beside it.
	return s, nil
}

// samePlugins refuses shards whose plugins describe themselves differently
// (another version or device).
func samePlugins(a, b *summary.Summary, dirA, dirB string) error {
	bs := append([]summary.BackendSummary{b.Reference}, b.Backends...)
	for i, x := range append([]summary.BackendSummary{a.Reference}, a.Backends...) {
		if i >= len(bs) || bs[i].Name != x.Name {
			return fmt.Errorf("%s and %s have different backends", dirA, dirB)
		}
		if y := bs[i]; x.Info != nil && y.Info != nil && !reflect.DeepEqual(x.Info, y.Info) {
			return fmt.Errorf("backend %s: %s ran %s %s on %s, %s ran %s %s on %s: plugin versions differ",
				x.Name, dirA, x.Info.Name, x.Info.Version, x.Info.Device, dirB, y.Info.Name, y.Info.Version, y.Info.Device)
		}
	}
	return nil
}

type merger struct {
	set     *resultsdir.Set
	sums    map[*resultsdir.File]*summary.Summary
	digests map[string]*digest.RunHasher // run digests per backend, rebuilt from the lines
}

// summary builds the merged summary.json.
func (m *merger) summary(now time.Time, opt MergeOptions) *summary.Summary {
	set := m.set
	first := m.sums[set.Files[0]]
	s := &summary.Summary{Schema: summary.SchemaVersion, Model: first.Model, Datasets: first.Datasets}
	s.Run = summary.RunInfo{ID: now.Format("20060102-150405") + "-" + first.Run.Name + "-merged", Name: first.Run.Name, Spec: first.Run.Spec,
		Started: first.Run.Started, Finished: first.Run.Finished, EvalrunVersion: opt.Version, GitCommit: opt.GitCommit,
		Host:          summary.ThisHost(),
		EffectiveSpec: first.Run.EffectiveSpec,
		Merged:        &summary.MergeMarker{SpecDigest: set.Manifest.SpecDigest, Partial: len(set.Missing) > 0, Missing: set.Missing},
		Limit:         first.Run.Limit} // the shards' specs are the same (their digest): so is --limit
	for _, f := range set.Files {
		s.Run.Merged.Shards = append(s.Run.Merged.Shards, f.Dir)
	}
	v := &verdict.Builder{Relative: opt.RelativeGates, LiveRef: first.Reference.Kind != "kld_base",
		BenchedApart: func(a, b string) string {
			return resultsdir.BenchedApart(set.Manifest.Units, set.Files[0].Manifest.Shard.Total, a, b)
		}}
	if s.Run.Limit > 0 {
		v.Limited(s.Run.Limit)
	}
	s.Reference = m.backend(first.Reference, func(x *summary.Summary) summary.BackendSummary { return x.Reference })
	v.Reference(&s.Reference)
	v.Speeds = map[string]*summary.Throughput{s.Reference.Name: s.Reference.Throughput}
	v.Statuses = map[string]string{s.Reference.Name: s.Reference.Status}
	merged := make([]summary.BackendSummary, len(set.Manifest.Backends))
	for bi := range merged {
		merged[bi] = m.backend(first.Backends[bi], func(x *summary.Summary) summary.BackendSummary { return x.Backends[bi] })
		v.Speeds[merged[bi].Name], v.Statuses[merged[bi].Name] = merged[bi].Throughput, merged[bi].Status
	}
	for bi, b := range set.Manifest.Backends {
		bs := merged[bi]
		cmp := &verdict.Comparison{}
		for i, u := range set.Manifest.Units {
			cmp.Planned += u.Rows
			for _, r := range set.Results[i] {
				if r.Backend != b.Name {
					continue
				}
				uc, err := verdict.UnmarshalState(r.State)
				if err != nil {
					bs.Status, bs.Error = summary.StatusFailed, fmt.Sprintf("%s: unit %s: %v", set.Owner[i].Dir, u.ID, err)
					continue
				}
				cmp.Add(uc)
			}
		}
		s.Backends = append(s.Backends, v.Candidate(bs, cmp, b.Gates))
	}
	for _, f := range set.Files {
		x := m.sums[f]
		if x.Run.Started.Before(s.Run.Started) {
			s.Run.Started = x.Run.Started
		}
		if x.Run.Finished.After(s.Run.Finished) {
			s.Run.Finished = x.Run.Finished
		}
		if x.Host != nil {
			if s.Host == nil {
				s.Host = &summary.HostTiming{}
			}
			s.Host.Add(x.Host)
		}
		// What went wrong in a shard beyond its backends (an interruption,
		// a file not written) makes the merge an error too.
		if x.Verdict.Status == summary.VerdictError {
			var why []string
			for _, r := range x.Verdict.Reasons {
				why = append(why, fmt.Sprintf("shard %s: %s", f.Manifest.Shard, r))
			}
			v.Error(why...)
		}
	}
	s.Run.DurationS = s.Run.Finished.Sub(s.Run.Started).Seconds()
	if len(set.Missing) > 0 {
		v.Note(fmt.Sprintf("partial: %d of %d units were not run", len(set.Missing), len(set.Manifest.Units)))
	}
	s.Verdict = v.Result()
	return s
}

// backend merges one backend's block over the shards: the first shard's
// description and load, the first failure, the eval calls summed, the
// throughput of the shard that ran its bench, the highest peak memory.
func (m *merger) backend(base summary.BackendSummary, of func(*summary.Summary) summary.BackendSummary) summary.BackendSummary {
	out := base
	out.Status, out.Error, out.Eval, out.Throughput, out.PeakRSSBytes, out.Gates, out.Accuracy, out.Pass, out.Digest, out.Cache = summary.StatusOK, "", nil, nil, nil, nil, nil, false, nil, nil
	bench := resultsdir.BenchUnit(base.Name)
	var reports []*diag.Report
	for _, f := range m.set.Files {
		b := of(m.sums[f])
		reports = append(reports, b.Diagnostics)
		if b.Status != summary.StatusOK && out.Status == summary.StatusOK {
			out.Status, out.Error = b.Status, fmt.Sprintf("shard %s: %s", f.Manifest.Shard, b.Error)
		}
		if b.Eval != nil {
			if out.Eval == nil {
				out.Eval = &summary.EvalTiming{}
			}
			out.Eval.Add(b.Eval)
		}
		if c := b.Cache; c != nil && out.Cache == nil {
			first := *c
			out.Cache = &first
		} else if c != nil {
			out.Cache.Add(c)
		}
		if h := m.digests[base.Name]; h != nil {
			out.Digest = h.Sum()
		}
		if b.PeakRSSBytes != nil && (out.PeakRSSBytes == nil || *b.PeakRSSBytes > *out.PeakRSSBytes) {
			out.PeakRSSBytes = b.PeakRSSBytes
		}
		for i, u := range m.set.Manifest.Units {
			if u.ID == bench && m.set.Owner[i] == f {
				out.Throughput = b.Throughput
			}
		}
	}
	out.Diagnostics = diag.Merge(reports)
	return out
}

// readPrompts folds the digests of the shards' prompts.jsonl lines into
// each backend's run digest in plan order, as the unsharded run folds them.
func (m *merger) readPrompts() {
	m.digests = map[string]*digest.RunHasher{}
	for _, unit := range m.set.Prompts {
		for _, l := range unit {
			var p summary.PromptResult
			if err := json.Unmarshal(l, &p); err != nil || p.PromptDigest == nil {
				continue
			}
			if m.digests[p.Backend] == nil {
				m.digests[p.Backend] = &digest.RunHasher{}
			}
			m.digests[p.Backend].Add(p.Dataset, p.ID, *p.PromptDigest)
		}
	}
}

// writePrompts writes the lines in plan order: each unit's lines from the
// shard that ran it, in that shard's order.
func (m *merger) writePrompts(path string) error {
	out, err := atomicfile.CreateLines(path)
	if err != nil {
		return err
	}
	for _, unit := range m.set.Prompts {
		for _, l := range unit {
			out.WriteLine(l)
		}
	}
	return out.Commit()
}
