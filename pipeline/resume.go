package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/pipeline/verdict"
)

// A resumed run (Options.Resume) continues an interrupted run in the same
// results directory. Every run writes its units file (units.jsonl) as it
// goes, each unit synced when it is done with its comparisons and its
// prompts.jsonl lines, so a run stopped any way (Ctrl-C, SIGKILL, the OOM
// killer, a power cut) loses at most the unit in flight. The resumed run
// takes over the longest run of completed units from the start of the
// plan (of the shard's units, for a shard), with their comparisons,
// prompts.jsonl lines and digests, and computes the rest. Comparisons are
// added in plan order as in one uninterrupted run, so the summary has the
// same bits (timings aside).

// resumeFrom reads the interrupted run in dir and takes over its completed
// units. It refuses (an *exitcode.InputError) a directory with nothing to resume,
// another shard's directory, another spec's run and one another build of a
// plugin made.
func (r *runner) resumeFrom(dir string) error {
	f, err := resultsdir.ReadUnits(dir)
	if err != nil {
		return exitcode.Input("--resume: nothing to resume: %v", err)
	}
	if f.Note != "" {
		r.log.Warn("--resume: " + f.Note)
	}
	want := r.shard()
	units := r.planUnits()
	switch m := f.Manifest; {
	case m.Shard != want && m.Shard.Total == 1:
		return exitcode.Input("--resume: %s holds a whole run, not shard %s: resume it without --shard", dir, want)
	case m.Shard != want:
		return exitcode.Input("--resume: %s holds shard %s of a run: resume it with --shard %s", dir, m.Shard, m.Shard)
	case m.SpecDigest != r.specDigest():
		return exitcode.Input("--resume: %s was run with another spec (models, datasets, backends, options or gates differ): spec digest %.12s, this spec's %.12s", dir, m.SpecDigest, r.specDigest())
	case len(m.Units) != len(units):
		return exitcode.Input("--resume: %s plans %d units, this spec %d", dir, len(m.Units), len(units))
	}
	for _, now := range r.plugins() {
		for _, was := range f.Manifest.Plugins {
			if was.Backend == now.Backend && was != now {
				return exitcode.Input("--resume: backend %s: %s was run by plugin %s %s, this run's is %s %s: its results would mix two builds (--force runs it again)",
					now.Backend, dir, was.Name, was.Version, now.Name, now.Version)
			}
		}
	}
	records := map[string]resultsdir.Record{}
	for _, rec := range f.Units {
		records[rec.Unit] = rec
	}
	var todo []resultsdir.Unit // this run's units, in plan order
	for _, u := range units {
		if r.mine(u.ID) {
			todo = append(todo, u)
		}
	}
	done := 0 // the completed units before the first that is not: taken over
	for ; done < len(todo); done++ {
		rec := records[todo[done].ID]
		cmps, prompts, ok := r.unitComplete(todo[done], rec)
		if !ok {
			break
		}
		for _, c := range r.cands {
			c.cmp.Add(cmps[c.rb.Name])
			c.cmp.Planned += todo[done].Rows
		}
		for i, p := range prompts {
			for _, rb := range r.backends() {
				if rb.Name == p.Backend {
					rb.digest.Add(p.Dataset, p.ID, *p.PromptDigest)
				}
			}
			r.promptLog.WriteLine(rec.Prompts[i])
		}
		r.unitsOut.Carry(rec)
	}
	r.owned = map[string]bool{}
	for _, u := range todo[done:] {
		r.owned[u.ID] = true
	}
	r.removeLeftovers(dir)
	r.log.Info("resuming", "dir", dir, "units_done", done, "units_left", len(todo)-done)
	return nil
}

// unitComplete reads the interrupted run's record of a unit, if it
// finished the unit: each candidate's comparison of all its positions (by
// backend) and every backend's prompts.jsonl line. A bench unit is always
// run again (it is last in the plan and its figures are timings).
func (r *runner) unitComplete(u resultsdir.Unit, rec resultsdir.Record) (cmps map[string]*verdict.Comparison, prompts []summary.PromptResult, ok bool) {
	if strings.HasPrefix(u.ID, resultsdir.BenchUnit("")) || rec.Unit != u.ID {
		return nil, nil, false
	}
	backends := map[string]bool{}
	for _, l := range rec.Prompts {
		var p summary.PromptResult
		if json.Unmarshal(l, &p) != nil || p.PromptDigest == nil || resultsdir.PromptUnit(p.Mode, p.Dataset, p.ID) != u.ID {
			return nil, nil, false
		}
		backends[p.Backend] = true
		prompts = append(prompts, p)
	}
	cmps = map[string]*verdict.Comparison{}
	for _, res := range rec.Results {
		st, err := verdict.UnmarshalState(res.State)
		if err != nil || st.Compared() != u.Rows {
			return nil, nil, false
		}
		cmps[res.Backend] = st
	}
	if r.ref != nil && !backends[r.ref.Name] {
		return nil, nil, false
	}
	for _, c := range r.cands {
		if cmps[c.rb.Name] == nil || !backends[c.rb.Name] {
			return nil, nil, false
		}
	}
	return cmps, prompts, true
}

// removeLeftovers removes the temporary files of the results a killed run
// was writing (this run holds the directory's lock; its own are kept).
func (r *runner) removeLeftovers(dir string) {
	left := r.unitsOut.Leftovers(dir)
	left = append(left, atomicfile.Leftovers(filepath.Join(dir, resultsdir.PromptsFile), r.promptLog.File())...)
	left = append(left, atomicfile.Leftovers(filepath.Join(dir, resultsdir.SummaryFile))...)
	for _, name := range left {
		if os.Remove(name) == nil {
			r.log.Info("removed a killed run's temporary file", "file", name)
		}
	}
}
