package pipeline

import (
	"runtime"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/spec"
)

// NewPlan resolves a loaded spec against its model: it checks the model's
// sha256, reads its tokenizer, tokenizes every dataset once and checks that
// every backend's model override has the reference's vocabulary. Every
// error is an *InputError (exit code 2).
func NewPlan(s *spec.Spec) (*Plan, error) {
	hm, err := openHostModel(s.Model.Path, s.Model.SHA256)
	if err != nil {
		return nil, err
	}
	p := &Plan{
		Name:      s.Name,
		SpecPath:  s.Path,
		SpecDir:   s.Dir,
		OutputDir: s.Output.Dir,
		Formats:   s.Output.Formats,
		PluginDir: s.PluginDir,
		Model:     hm.summary,
		BOS:       -1,
		Bench:     BenchPlan{Enabled: s.Bench.Enabled, NPrompt: s.Bench.NPrompt, NGen: s.Bench.NGen, Reps: s.Bench.Reps, Warmup: s.Bench.Warmup},
		Timeouts:  timeouts{start: s.Timeouts.Start, load: s.Timeouts.Load, eval: s.Timeouts.Eval, bench: s.Timeouts.Bench},
	}
	p.VocabDigest = backend.VocabDigest(hm.tok.VocabSize(), func(id int) string { return hm.tok.Token(int32(id)) })
	if hm.tok.AddBOS() {
		p.BOS = hm.tok.BOS()
	}
	for _, d := range s.Datasets {
		dp := DatasetPlan{Name: d.Name, Path: d.Path, Mode: string(d.Mode), NCtx: d.NCtx, MaxNew: d.MaxNewTokens}
		if err := tokenizeDataset(hm, &dp, d.Limit); err != nil {
			return nil, err
		}
		p.Datasets = append(p.Datasets, dp)
	}

	threads := func(n int) int {
		if n <= 0 {
			return runtime.NumCPU()
		}
		return n
	}
	ref := s.Reference
	p.Reference = BackendPlan{Name: ref.Name, Plugin: ref.Plugin, Threads: threads(ref.Threads), Model: ref.Model,
		Options: ref.Options, KLDBase: ref.KLDBase, KLDBaseOut: ref.Output.KLDBase}
	if p.Reference.Model == "" {
		p.Reference.Model = s.Model.Path
	}
	if ref.KLDBase == "" && p.Reference.Model != s.Model.Path {
		if err := checkSameVocab(hm, ref.Name, p.Reference.Model); err != nil {
			return nil, err
		}
	}
	for _, b := range s.Candidates {
		bp := BackendPlan{Name: b.Name, Plugin: b.Plugin, Threads: threads(b.Threads), Model: b.Model,
			Options: b.Options, KLDBaseOut: b.Output.KLDBase}
		if bp.Model == "" {
			bp.Model = s.Model.Path
		} else if err := checkSameVocab(hm, b.Name, bp.Model); err != nil {
			return nil, err
		}
		for _, g := range s.Gates.Merge(b.Gates).List() {
			bp.Gates = append(bp.Gates, Gate{Name: g.Name, Metric: g.Metric, Max: g.Max, Limit: g.Limit})
		}
		p.Candidates = append(p.Candidates, bp)
	}
	nScore := 0
	for _, d := range p.Datasets {
		if d.Mode == ModeScore {
			nScore++
		}
	}
	wantsOut := p.Reference.KLDBaseOut != ""
	for _, b := range p.Candidates {
		wantsOut = wantsOut || b.KLDBaseOut != ""
	}
	if wantsOut && ref.KLDBase == "" && nScore != 1 {
		return nil, inputErr("%s: output.kld_base needs exactly one score dataset (a kld-base file holds one token stream with one n_ctx), the spec has %d", s.Path, nScore)
	}
	if ref.KLDBase == "" && len(p.Datasets) == 0 {
		return nil, inputErr("%s: no datasets and no reference.kld_base: nothing to compare", s.Path)
	}
	if len(p.Candidates) == 0 {
		return nil, inputErr("%s: no candidate backends", s.Path)
	}
	return p, nil
}
