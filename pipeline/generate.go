package pipeline

import (
	"context"
	"fmt"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine/sampling"
)

// generatePass runs every generate prompt: the reference generates greedily
// and each candidate is fed the reference's tokens (teacher forcing), so its
// logits are comparable at every step; then each candidate runs free on its
// own greedy tokens to find where it first diverges.
func (r *runner) generatePass(ctx context.Context) error {
	var prompts []genPrompt
	for _, d := range r.plan.Datasets {
		if d.Mode == ModeGenerate {
			prompts = append(prompts, d.Prompts...)
		}
	}
	if len(prompts) == 0 {
		return nil
	}
	for _, c := range r.liveCands() {
		for _, p := range prompts {
			c.cmp.planned += p.maxNew
		}
	}
	progress := newProgress(r.opt.Stderr, "generate", len(prompts))
	for i, p := range prompts {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !r.ref.ok() {
			return fmt.Errorf("the reference stopped")
		}
		r.generateOne(ctx, p)
		progress.step(i+1, p.dataset+" "+p.id)
	}
	return nil
}

type genPrompt struct {
	dataset string
	id      string
	tokens  []int32
	maxNew  int
}

// evalOne runs one Eval call that must return exactly one row.
func evalOne(ctx context.Context, rb *runBackend, req backend.EvalRequest) ([]float32, error) {
	s := rb.startEval(ctx, req)
	row, err := s.next()
	if err != nil {
		s.abandon()
		return nil, err
	}
	if err := s.finish(); err != nil {
		return nil, err
	}
	return row, nil
}

func (r *runner) generateOne(ctx context.Context, p genPrompt) {
	cands := r.liveCands()
	per := make([]*comparison, len(cands))
	for i := range per {
		per[i] = newComparison()
	}
	alive := make([]bool, len(cands))
	for i := range alive {
		alive[i] = true
	}
	refTokens := make([]int32, 0, p.maxNew)
	req := backend.EvalRequest{Session: "generate", Pos: 0, Tokens: p.tokens, LogitsFrom: len(p.tokens) - 1}
	for step := 0; step < p.maxNew; step++ {
		what := fmt.Sprintf("generate %s/%s step %d", p.dataset, p.id, step)
		ref, err := evalOne(ctx, r.ref, req)
		if err != nil {
			r.ref.fail(what, err)
			return
		}
		next := sampling.Greedy(ref)
		refTokens = append(refTokens, next)
		rows := make([][]float32, len(cands))
		errs := make([]error, len(cands))
		done := make(chan int, len(cands))
		for i, c := range cands {
			if !alive[i] {
				done <- i
				continue
			}
			go func(i int, c *candidate) {
				rows[i], errs[i] = evalOne(ctx, c.rb, req)
				done <- i
			}(i, c)
		}
		for range cands {
			<-done
		}
		for i, c := range cands {
			if !alive[i] {
				continue
			}
			if errs[i] != nil {
				c.rb.fail(what, errs[i])
				alive[i] = false
				continue
			}
			c.cmp.addLive(rows[i], ref, next)
			per[i].addLive(rows[i], ref, next)
		}
		req = backend.EvalRequest{Session: "generate", Pos: -1, Tokens: []int32{next}, LogitsFrom: 0}
	}

	for i, c := range cands {
		if !alive[i] {
			continue
		}
		free, err := r.freeRun(ctx, c.rb, p)
		if err != nil {
			c.rb.fail(fmt.Sprintf("free-running generate %s/%s", p.dataset, p.id), err)
			continue
		}
		c.cmp.addGreedy(free, refTokens)
		per[i].addGreedy(free, refTokens)
		pr := promptFromComparison(c.rb.name, p.dataset, p.id, "generate", per[i], true)
		pr.ReferenceTokens = refTokens
		pr.GeneratedTokens = free
		r.addPrompt(pr)
	}
}

// freeRun lets a backend generate greedily on its own tokens.
func (r *runner) freeRun(ctx context.Context, rb *runBackend, p genPrompt) ([]int32, error) {
	out := make([]int32, 0, p.maxNew)
	req := backend.EvalRequest{Session: "free", Pos: 0, Tokens: p.tokens, LogitsFrom: len(p.tokens) - 1}
	for step := 0; step < p.maxNew; step++ {
		row, err := evalOne(ctx, rb, req)
		if err != nil {
			return out, err
		}
		next := sampling.Greedy(row)
		out = append(out, next)
		req = backend.EvalRequest{Session: "free", Pos: -1, Tokens: []int32{next}, LogitsFrom: 0}
	}
	return out, nil
}
