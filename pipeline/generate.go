package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/sampling"
	"github.com/evalrun/evalrun/pipeline/digest"
	"github.com/evalrun/evalrun/pipeline/metrics"
	"github.com/evalrun/evalrun/pipeline/plan"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/spec"
	"github.com/evalrun/evalrun/pipeline/stream"
	"github.com/evalrun/evalrun/pipeline/summary"
	"github.com/evalrun/evalrun/pipeline/verdict"
)

// generatePass runs every generate prompt: the reference generates greedily
// and each candidate is fed the reference's tokens (teacher forcing), so its
// logits are comparable at every step; then each candidate runs free on its
// own greedy tokens to find where it first diverges.
func (r *runner) generatePass(ctx context.Context) {
	prompts := r.genPrompts()
	if len(prompts) == 0 {
		return
	}
	for _, c := range r.liveCands() {
		for _, p := range prompts {
			c.cmp.Planned += p.MaxNew
		}
	}
	tokens := 0
	for _, p := range prompts {
		tokens += p.MaxNew
	}
	ph := r.startPhase("generate", "prompts", "tokens", len(prompts), tokens, r.liveBackends())
	for _, p := range prompts {
		if ctx.Err() != nil || !r.ref.ok() {
			ph.finish(true)
			return
		}
		r.generateOne(ctx, p)
		ph.done(p.MaxNew)
	}
	ph.finish(ctx.Err() != nil)
}

// genPrompts lists the run's generate prompts.
func (r *runner) genPrompts() []plan.Prompt {
	var prompts []plan.Prompt
	for _, d := range r.plan.Datasets {
		for _, p := range d.Prompts {
			if r.mine(promptUnit(p)) {
				prompts = append(prompts, p)
			}
		}
	}
	return prompts
}

// startGenerate starts the first generate prompt's first step, if there
// is one, while the host still compares the score pass's last chunk;
// generateOne takes it up.
func (r *runner) startGenerate(ctx context.Context) {
	if ps := r.genPrompts(); len(ps) > 0 && r.ref != nil && r.ref.ok() {
		r.genFirst = r.startStep(ctx, promptUnit(ps[0]), refRequest(ps[0]), r.liveCands())
	}
}

// refRequest is the reference's first call of a prompt: all of it, one row.
func refRequest(p plan.Prompt) backend.EvalRequest {
	return backend.EvalRequest{Session: "generate", Pos: 0, Tokens: p.Tokens, LogitsFrom: len(p.Tokens) - 1}
}

// evalOne runs one Eval call that must return exactly one row.
func evalOne(ctx context.Context, rb *runBackend, req backend.EvalRequest) ([]float32, *stream.Call, error) {
	s := rb.startEval(ctx, req, 1)
	row, err := s.One()
	return row, s, err
}

// genStep is one step of a prompt's teacher forcing: the same request on
// the reference and on the candidates, started together (one round).
type genStep struct {
	unit  string // the prompt's
	ref   *stream.Call
	cands map[*candidate]*stream.Call
}

func (r *runner) startStep(ctx context.Context, unit string, req backend.EvalRequest, cands []*candidate) *genStep {
	g := &genStep{unit: unit, ref: r.ref.startEval(ctx, req, 1), cands: map[*candidate]*stream.Call{}}
	for _, c := range cands {
		g.cands[c] = c.rb.startEval(ctx, req, 1)
	}
	return g
}

// drop abandons c's call (nil: no step).
func (g *genStep) drop(c *candidate) {
	if g != nil {
		g.cands[c].Abandon()
		delete(g.cands, c)
	}
}

// abandon stops every call of the step (nil: no step).
func (g *genStep) abandon() {
	if g == nil {
		return
	}
	g.ref.Abandon()
	for c := range g.cands {
		g.drop(c)
	}
}

// calls are the step's calls, for its round.
func (g *genStep) calls() []*stream.Call {
	out := []*stream.Call{g.ref}
	for _, s := range g.cands {
		out = append(out, s)
	}
	return out
}

// generateOne teacher-forces the candidates on the reference's greedy
// tokens: step k is the same request on every backend, one round, and
// once its rows are in, step k+1 computes while the host compares them.
func (r *runner) generateOne(ctx context.Context, p plan.Prompt) {
	cands := r.liveCands()
	per := make([]*verdict.Comparison, len(cands))
	alive := make([]bool, len(cands))
	digests := make([]*digest.Hasher, len(cands))
	for i := range cands {
		per[i], alive[i], digests[i] = &verdict.Comparison{}, true, digest.NewHasher(len(p.Tokens)-1)
	}
	refDigest := digest.NewHasher(len(p.Tokens) - 1)
	defer r.unitDone(promptUnit(p), cands, per)
	var ref metrics.RefRow
	refTokens := make([]int32, 0, p.MaxNew)
	unit := promptUnit(p)
	step := r.genFirst // started during the score pass (the first prompt)
	if r.genFirst = nil; step == nil || step.unit != unit {
		step.abandon()
		step = r.startStep(ctx, unit, refRequest(p), cands)
	}
	for c := range step.cands { // one that stopped since the step started
		if !slices.Contains(cands, c) {
			step.drop(c)
		}
	}
	for k := range p.MaxNew {
		what := fmt.Sprintf("generate %s/%s step %d", p.Dataset, p.ID, k)
		refRow, err := step.ref.One()
		if err != nil {
			r.round(step.calls()...)
			step.abandon()
			r.ref.fail(ctx, what, err)
			return
		}
		rows := make([][]float32, len(cands))
		for i, c := range cands {
			s := step.cands[c]
			if alive[i] = s != nil; !alive[i] {
				continue
			}
			if rows[i], err = s.One(); err != nil {
				c.rb.fail(ctx, what, err)
				alive[i] = false
			}
		}
		r.round(step.calls()...)
		refDigest.Row(refRow)
		next := sampling.Greedy(refRow)
		refTokens = append(refTokens, next)
		ref.Set(refRow)
		var following *genStep
		if k+1 < p.MaxNew {
			var live []*candidate
			for i, c := range cands {
				if alive[i] {
					live = append(live, c)
				}
			}
			following = r.startStep(ctx, unit, backend.EvalRequest{Session: "generate", Pos: -1, Tokens: []int32{next}}, live)
		}
		var wg sync.WaitGroup // the candidates compare at once, while every backend computes step k+1
		for i, c := range cands {
			if !alive[i] {
				continue
			}
			wg.Go(func() {
				digests[i].Row(rows[i])
				t := time.Now()
				err := per[i].AddLive(rows[i], &ref, next, len(p.Tokens)-1+k)
				r.compared(t)
				c.rb.rows.Release(rows[i])
				if err != nil {
					c.rb.fail(ctx, what, err)
					alive[i] = false
				}
			})
		}
		wg.Wait()
		for i, c := range cands {
			if !alive[i] {
				following.drop(c)
			}
		}
		r.ref.rows.Release(refRow)
		step = following
	}
	// Every backend was fed the prompt and then the reference's tokens but
	// the last.
	for _, h := range append(digests, refDigest) {
		h.Tokens(p.Tokens)
		h.Tokens(refTokens[:max(len(refTokens)-1, 0)])
	}
	r.addPrompt(r.ref, summary.PromptResult{Backend: r.ref.Name, Reference: true, Dataset: p.Dataset, ID: p.ID, Mode: string(spec.ModeGenerate),
		Tokens: len(refTokens), ReferenceTokens: refTokens}, refDigest)

	for i, c := range cands {
		if !alive[i] {
			continue
		}
		free, err := r.freeRun(ctx, c.rb, p)
		if err != nil {
			c.rb.fail(ctx, fmt.Sprintf("free-running generate %s/%s", p.Dataset, p.ID), err)
			continue
		}
		per[i].AddGreedy(free, refTokens)
		pr := per[i].Prompt(c.rb.Name, p.Dataset, p.ID, spec.ModeGenerate, true)
		pr.ReferenceTokens, pr.GeneratedTokens = refTokens, free
		r.addPrompt(c.rb, pr, digests[i])
	}
}

// promptUnit is a generate prompt's unit id (package resultsdir).
func promptUnit(p plan.Prompt) string { return resultsdir.GenerateUnit(p.Dataset, p.ID) }

// freeRun lets a backend generate greedily on its own tokens.
func (r *runner) freeRun(ctx context.Context, rb *runBackend, p plan.Prompt) ([]int32, error) {
	out := make([]int32, 0, p.MaxNew)
	req := backend.EvalRequest{Session: "free", Pos: 0, Tokens: p.Tokens, LogitsFrom: len(p.Tokens) - 1}
	for range p.MaxNew {
		row, s, err := evalOne(ctx, rb, req)
		r.round(s)
		if err != nil {
			return out, err
		}
		next := sampling.Greedy(row)
		rb.rows.Release(row)
		out = append(out, next)
		req = backend.EvalRequest{Session: "free", Pos: -1, Tokens: []int32{next}}
	}
	return out, nil
}
