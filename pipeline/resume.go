package pipeline

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/evalrun/evalrun/pipeline/shard"
)

// A resumed run (Options.Resume) continues an interrupted run in the same
// results directory: every run keeps its units file (units.jsonl), and the
// resumed run takes over the longest run of completed units from the start
// of the plan, with their comparisons, prompts.jsonl lines and digests, and
// computes the rest. Comparisons are added in plan order as in one
// uninterrupted run, so the summary has the same bits (timings aside).

// resumeFrom reads the interrupted run in dir and takes over its completed
// units. It refuses (an *InputError) a directory with nothing to resume,
// a shard's directory and another spec's run.
func (r *runner) resumeFrom(dir string) error {
	f, err := shard.Read(dir)
	if err != nil {
		return inputErr("--resume: %s: nothing to resume: %v", dir, err)
	}
	units := r.planUnits()
	switch m := f.Manifest; {
	case m.Shard.Total != 1:
		return inputErr("--resume: %s holds shard %s of a run: resume it with --shard %s", dir, m.Shard, m.Shard)
	case m.SpecDigest != r.specDigest():
		return inputErr("--resume: %s was run with another spec (models, datasets, backends, options or gates differ): spec digest %.12s, this spec's %.12s", dir, m.SpecDigest, r.specDigest())
	case len(m.Units) != len(units):
		return inputErr("--resume: %s plans %d units, this spec %d", dir, len(m.Units), len(units))
	}
	for _, b := range r.plan.Spec.Backends() {
		if b.Output.KLDBase != "" {
			return &InputError{r.plan.Spec.Err(b.Key+".output.kld_base", "a resumed run cannot write a kld-base file (it scores only the chunks that were not done)")}
		}
	}
	index := map[string]int{}
	for i, u := range units {
		index[u.ID] = i
	}
	lines := make([][][]byte, len(units))
	if err := readPromptLines(filepath.Join(dir, "prompts.jsonl"), index, lines); err != nil {
		return err
	}
	results := make([][]shard.Result, len(units))
	for _, res := range f.Results {
		if i, ok := index[res.Unit]; ok {
			results[i] = append(results[i], res)
		}
	}
	done := 0
	for done < len(units) && r.unitComplete(units[done], results[done], lines[done]) {
		done++
	}
	r.owned = map[string]bool{}
	for _, u := range units[done:] {
		r.owned[u.ID] = true
	}
	for i, u := range units[:done] {
		for _, c := range r.cands {
			for _, res := range results[i] {
				if res.Backend == c.rb.Name {
					st, _ := unmarshalState(res.State) // checked by unitComplete
					c.cmp.add(st)
					c.cmp.planned += u.Rows
					r.unitsOut.Add(res)
				}
			}
		}
		for _, l := range lines[i] {
			var p PromptResult
			json.Unmarshal(l, &p) // checked by unitComplete
			for _, rb := range r.backends() {
				if rb.Name == p.Backend && p.Prompt != nil {
					rb.digest.Add(p.Dataset, p.ID, *p.Prompt)
				}
			}
			r.promptLog.addLine(l)
		}
	}
	r.log.Info("resuming", "dir", dir, "units_done", done, "units_left", len(units)-done)
	return nil
}

// unitComplete reports whether the interrupted run finished a unit: every
// candidate compared all its positions and every backend wrote its
// prompts.jsonl line. A bench unit is always run again (it is last in the
// plan and its figures are timings).
func (r *runner) unitComplete(u shard.Unit, results []shard.Result, lines [][]byte) bool {
	if strings.HasPrefix(u.ID, shard.BenchUnit("")) {
		return false
	}
	backends := map[string]bool{}
	for _, l := range lines {
		var p PromptResult
		if json.Unmarshal(l, &p) != nil || p.Prompt == nil {
			return false
		}
		backends[p.Backend] = true
	}
	if r.ref != nil && !backends[r.ref.Name] {
		return false
	}
	for _, c := range r.cands {
		found := false
		for _, res := range results {
			if res.Backend != c.rb.Name {
				continue
			}
			st, err := unmarshalState(res.State)
			if err != nil || st.compared != u.Rows {
				return false
			}
			found = true
		}
		if !found || !backends[c.rb.Name] {
			return false
		}
	}
	return true
}
