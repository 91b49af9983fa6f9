package pipeline

import (
	"context"
	"fmt"
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

// startGenerate starts the first generate prompt's reference call, if
// there is one, while the host still compares the score pass's last chunk;
// generateOne takes it up.
func (r *runner) startGenerate(ctx context.Context) {
	if ps := r.genPrompts(); len(ps) > 0 && r.ref != nil && r.ref.ok() {
		r.genFirst = r.ref.startEval(ctx, refRequest(ps[0]), 1)
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

// generateOne teacher-forces the candidates on the reference's greedy
// tokens. The reference computes step k+1 while the candidates compute
// step k and the host compares it: one round.
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
	req := refRequest(p)
	refCall := r.genFirst // started during the score pass (the first prompt)
	if r.genFirst = nil; refCall == nil {
		refCall = r.ref.startEval(ctx, req, 1)
	}
	var pending []*stream.Call // the candidates' calls booked with the reference's next one
	for step := range p.MaxNew {
		what := fmt.Sprintf("generate %s/%s step %d", p.Dataset, p.ID, step)
		refRow, err := refCall.One()
		r.round(append(pending, refCall)...)
		if err != nil {
			r.ref.fail(ctx, what, err)
			return
		}
		refDigest.Row(refRow)
		next := sampling.Greedy(refRow)
		refTokens = append(refTokens, next)
		ref.Set(refRow)
		nextReq := backend.EvalRequest{Session: "generate", Pos: -1, Tokens: []int32{next}}
		if step+1 < p.MaxNew {
			refCall = r.ref.startEval(ctx, nextReq, 1)
		}
		pending = make([]*stream.Call, len(cands))
		var wg sync.WaitGroup
		for i, c := range cands {
			if !alive[i] {
				continue
			}
			wg.Go(func() {
				row, s, err := evalOne(ctx, c.rb, req)
				if pending[i] = s; err == nil { // compared at once, while the others compute
					digests[i].Row(row)
					t := time.Now()
					err = per[i].AddLive(row, &ref, next, len(p.Tokens)-1+step)
					r.compared(t)
					c.rb.rows.Release(row)
				}
				if err != nil {
					c.rb.fail(ctx, what, err)
					alive[i] = false
				}
			})
		}
		wg.Wait()
		r.ref.rows.Release(refRow)
		req = nextReq
	}
	r.round(pending...)
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
