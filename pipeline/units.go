package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"path/filepath"

	"github.com/evalrun/evalrun/internal/exitcode"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/pipeline/verdict"
)

// The run's units (package resultsdir): every score chunk, every generate prompt
// and every backend's bench. Each candidate's comparison is accumulated
// per unit and merged into the run's in plan order (verdict.Comparison.Add), so a
// run split into shards and merged gives the same bits as one process.

// planUnits lists the units in plan order, with the positions a candidate
// compares in each.
func (r *runner) planUnits() []resultsdir.Unit {
	var out []resultsdir.Unit
	for _, ch := range r.scoreChunks() {
		out = append(out, resultsdir.Unit{ID: chunkUnit(ch), Rows: ch.Rows()})
	}
	if r.base == nil {
		for _, d := range r.plan.Datasets {
			for _, p := range d.Prompts {
				out = append(out, resultsdir.Unit{ID: promptUnit(p), Rows: p.MaxNew})
			}
		}
	}
	if r.plan.Spec.Bench.Enabled {
		for _, b := range r.plan.Spec.Backends() {
			u := resultsdir.Unit{ID: resultsdir.BenchUnit(b.Name)}
			if len(b.Gates.InRun()) > 0 {
				u.With = resultsdir.BenchUnit(*b.Gates.SpeedBaseline) // one shard benches both
			}
			out = append(out, u)
		}
	}
	return out
}

// startShard selects this shard's units, marks the summary as a shard and
// starts its units file. Without a shard every unit is the run's, and the
// units file is kept for --resume.
func (r *runner) startShard(outDir string) error {
	for _, b := range r.plan.Spec.Backends() {
		if b.Output.KLDBase != "" && (r.opt.Shard != nil || r.opt.Resume) {
			return &exitcode.InputError{Err: r.plan.Spec.Err(b.Key+".output.kld_base", "a shard or a resumed run cannot write a kld-base file (it scores only part of the chunks)")}
		}
	}
	sh := r.shard()
	m := r.manifest(sh)
	if r.opt.Shard != nil {
		marker := &summary.ShardMarker{Index: sh.Index, Total: sh.Total, SpecDigest: m.SpecDigest}
		r.owned = map[string]bool{}
		for i, u := range m.Units {
			if sh.Owns(m.Units, i) {
				r.owned[u.ID] = true
				marker.Units = append(marker.Units, u.ID)
			}
		}
		r.sum.Run.Shard = marker
	}
	w, err := resultsdir.CreateUnits(outDir, m)
	if err != nil {
		return &exitcode.InputError{Err: err}
	}
	r.unitsOut = w
	return nil
}

// shard is the run's shard: 0/1 for a run not split into shards.
func (r *runner) shard() resultsdir.Shard {
	if r.opt.Shard != nil {
		return *r.opt.Shard
	}
	return resultsdir.Shard{Index: 0, Total: 1}
}

// manifest is the units file's first line for shard sh of the run.
func (r *runner) manifest(sh resultsdir.Shard) resultsdir.Manifest {
	m := resultsdir.Manifest{SpecDigest: r.specDigest(), Shard: sh, Units: r.planUnits()}
	for _, b := range r.plan.Spec.Backends() {
		if b.Key != "reference" {
			m.Backends = append(m.Backends, resultsdir.Backend{Name: b.Name, Gates: b.Gates})
		}
	}
	m.Plugins = r.plugins()
	return m
}

// plugins lists what the started backends' plugins said they were.
func (r *runner) plugins() []resultsdir.Plugin {
	var out []resultsdir.Plugin
	for _, rb := range r.backends() {
		if rb.info != nil {
			out = append(out, resultsdir.Plugin{Backend: rb.Name, Name: rb.info.Name, Version: rb.info.Version})
		}
	}
	return out
}

// mine reports whether a unit is this run's to compute.
func (r *runner) mine(unit string) bool { return r.owned == nil || r.owned[unit] }

// unitDone merges a finished (or abandoned) unit's comparisons into the
// candidates' and records them, with the unit's prompts.jsonl lines, in the
// units file (for a merge or a resume), durably.
func (r *runner) unitDone(unit string, cands []*candidate, per []*verdict.Comparison) {
	var results []resultsdir.Result
	for i, c := range cands {
		c.cmp.Add(per[i])
		st, err := per[i].MarshalState()
		if err != nil {
			r.problem("%s: unit %s not recorded: %v", resultsdir.UnitsFile, unit, err)
			continue
		}
		results = append(results, resultsdir.Result{Backend: c.rb.Name, State: st})
	}
	r.unitsOut.Add(unit, results)
}

// benchDone records a backend's bench unit, unless it was interrupted (a
// merge takes its figures from the summary).
func (r *runner) benchDone(ctx context.Context, name string) {
	if ctx.Err() == nil {
		r.unitsOut.Add(resultsdir.BenchUnit(name), nil)
	}
}

// specDigest hashes what decides a run's results: the model, every unit's
// tokens, the backends with their options and gates, and the bench
// settings; not paths, threads, timeouts or output settings, which may
// differ between the machines that run the shards.
func (r *runner) specDigest() string {
	p := r.plan
	type backendKey struct {
		Key, Name, Plugin, PluginFile, ModelFile string
		Options                                  map[string]any
		Gates                                    any
	}
	head := struct {
		ModelSHA256 string
		NVocab      int
		BOS         int32
		KLDBase     bool
		Backends    []backendKey
		Bench       any
	}{ModelSHA256: p.Model.SHA256, NVocab: p.Model.NVocab, BOS: p.BOS, KLDBase: r.base != nil, Bench: p.Spec.Bench}
	for _, b := range p.Spec.Backends() {
		k := backendKey{Key: b.Key, Name: b.Name, Plugin: b.Plugin, Options: b.Options, Gates: b.Gates}
		if b.PluginPath != "" {
			k.PluginFile = filepath.Base(b.PluginPath)
		}
		if b.Model != p.Spec.Model.Path {
			k.ModelFile = filepath.Base(b.Model)
		}
		head.Backends = append(head.Backends, k)
	}
	h := sha256.New()
	data, _ := json.Marshal(head) // maps marshal with sorted keys
	h.Write(data)
	unit := func(id string, tokens []int32, n int) {
		h.Write([]byte("\x00" + id + "\x00"))
		binary.Write(h, binary.LittleEndian, tokens)
		binary.Write(h, binary.LittleEndian, uint64(n))
	}
	for _, ch := range r.scoreChunks() {
		unit(chunkUnit(ch), ch.Tokens, len(ch.Tokens))
	}
	for _, d := range p.Datasets {
		for _, g := range d.Prompts {
			unit(promptUnit(g), g.Tokens, g.MaxNew)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
