package enginebackend

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
)

// Bench implements backend.Backend the way llama-bench measures one test:
// an optional warm-up (a prompt of NPrompt if NPrompt > 0, then one
// generated token if NGen > 0), then Reps repetitions, each on a cleared
// cache: the prompt in NBatch chunks (each chunk one decode whose logits are
// computed for its last token only, as llama_batch_get_one does), then NGen
// single-token decodes. Tokens are random from a generator seeded with Seed;
// the first is BOS when the model adds one. Eval sessions are not touched.
func (b *Backend) Bench(ctx context.Context, req backend.BenchRequest) (backend.BenchResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := req.Validate(); err != nil {
		return backend.BenchResult{}, err
	}
	if b.model == nil {
		return backend.BenchResult{}, backend.Errorf(backend.ErrNotLoaded, "bench: no model loaded (call Load first)")
	}
	r := &benchRun{
		ctx:    ctx,
		s:      b.model.NewSession(req.NPrompt + max(req.NGen, 1)),
		rng:    rand.New(rand.NewPCG(uint64(req.Seed), 0x65766c72756e)), // "evlrun"
		nVocab: b.model.Config.NVocab,
		nBatch: req.Batch(),
		bos:    -1,
	}
	if t := b.model.Tokenizer(); t != nil && t.AddBOS() {
		r.bos = warmupToken(b.model)
	}

	res := backend.BenchResult{NPrompt: req.NPrompt, NGen: req.NGen}
	if req.Warmup {
		start := time.Now()
		if req.NPrompt > 0 {
			if err := r.prompt(req.NPrompt); err != nil {
				return backend.BenchResult{}, err
			}
		}
		if req.NGen > 0 {
			if err := r.gen(1); err != nil {
				return backend.BenchResult{}, err
			}
		}
		res.WarmupNS = time.Since(start).Nanoseconds()
	}
	for range req.Reps {
		r.s.Reset()
		start := time.Now()
		if req.NPrompt > 0 {
			if err := r.prompt(req.NPrompt); err != nil {
				return backend.BenchResult{}, err
			}
		}
		if req.NGen > 0 {
			if err := r.gen(req.NGen); err != nil {
				return backend.BenchResult{}, err
			}
		}
		res.SamplesNS = append(res.SamplesNS, time.Since(start).Nanoseconds())
	}
	return res, nil
}

type benchRun struct {
	ctx    context.Context
	s      *engine.Session
	rng    *rand.Rand
	nVocab int
	nBatch int
	bos    int32 // -1: the model adds no BOS
}

func (r *benchRun) token(first bool) int32 {
	if first && r.bos >= 0 {
		return r.bos
	}
	return int32(r.rng.IntN(r.nVocab))
}

// ignore consumes a logits row; the timing includes computing it.
func ignore(int, []float32) error { return nil }

// prompt is llama-bench's test_prompt.
func (r *benchRun) prompt(n int) error {
	tokens := make([]int32, 0, min(n, r.nBatch))
	for done := 0; done < n; {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		chunk := min(n-done, r.nBatch)
		tokens = tokens[:0]
		for i := range chunk {
			tokens = append(tokens, r.token(done == 0 && i == 0))
		}
		last := chunk - 1
		if err := r.s.Decode(tokens, func(i int) bool { return i == last }, ignore); err != nil {
			return err
		}
		done += chunk
	}
	return nil
}

// gen is llama-bench's test_gen: n single-token decodes.
func (r *benchRun) gen(n int) error {
	tok := []int32{r.token(true)}
	for range n {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if err := r.s.Decode(tok, nil, ignore); err != nil {
			return err
		}
		tok[0] = r.token(false)
	}
	return nil
}
