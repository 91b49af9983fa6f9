package llamaplugin

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/plugins/llamacpp/llama"
)

// Bench implements backend.Backend as llama-bench runs one test: a fresh
// context of n_prompt + n_gen cells with the Load settings, an optional
// warm-up (the prompt, then one generated token), then Reps repetitions,
// each on a cleared KV cache: the prompt in NBatch chunks with logits for
// each chunk's last token only (llama_batch_get_one), then NGen single-token
// decodes, synchronizing after each as llama-bench does. Tokens are random
// (seeded), BOS first when the vocabulary adds one. Eval sessions are not
// touched.
func (b *Backend) Bench(ctx context.Context, req backend.BenchRequest) (backend.BenchResult, error) {
	if err := req.Validate(); err != nil {
		return backend.BenchResult{}, err
	}
	nBatch := req.Batch()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.model == nil {
		return backend.BenchResult{}, backend.Errorf(backend.ErrNotLoaded, "bench: no model loaded (call Load first)")
	}
	c, err := b.model.NewContext(llama.ContextParams{
		NCtx: req.NPrompt + max(req.NGen, 1), NBatch: nBatch, NUBatch: min(nBatch, UBatch), NSeqMax: 1,
		Threads: b.threads, FlashAttn: b.opts.flashAttn, TypeK: b.opts.kvType, TypeV: b.opts.kvType,
	})
	if err != nil {
		return backend.BenchResult{}, err
	}
	defer c.Free()
	r := &benchRun{ctx: ctx, c: c, rng: rand.New(rand.NewPCG(uint64(req.Seed), 0x65766c72756e)), nVocab: b.info.NVocab,
		nBatch: min(nBatch, c.BatchCap()), bos: b.model.BOS()}

	res := backend.BenchResult{NPrompt: req.NPrompt, NGen: req.NGen}
	if req.Warmup {
		start := time.Now()
		if err := r.test(req.NPrompt, min(req.NGen, 1)); err != nil {
			return backend.BenchResult{}, err
		}
		res.WarmupNS = time.Since(start).Nanoseconds()
	}
	for range req.Reps {
		c.Clear()
		start := time.Now()
		if err := r.test(req.NPrompt, req.NGen); err != nil {
			return backend.BenchResult{}, err
		}
		res.SamplesNS = append(res.SamplesNS, time.Since(start).Nanoseconds())
	}
	return res, nil
}

type benchRun struct {
	ctx    context.Context
	c      *llama.Context
	rng    *rand.Rand
	nVocab int
	nBatch int
	bos    int32 // -1: the vocabulary adds none
	pos    int
}

func (r *benchRun) token(first bool) int32 {
	if first && r.bos >= 0 {
		return r.bos
	}
	return int32(r.rng.IntN(r.nVocab))
}

// test is llama-bench's test_prompt then test_gen, from position 0.
func (r *benchRun) test(nPrompt, nGen int) error {
	r.c.Clear()
	r.pos = 0
	tokens := make([]int32, 0, r.nBatch)
	for done := 0; done < nPrompt; {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		n := min(nPrompt-done, r.nBatch)
		tokens = tokens[:0]
		for i := range n {
			tokens = append(tokens, r.token(done == 0 && i == 0))
		}
		last := n - 1
		if err := r.c.Decode(0, r.pos, tokens, func(i int) bool { return i == last }); err != nil {
			return err
		}
		r.pos += n
		done += n
	}
	r.c.Synchronize()
	tok := []int32{r.token(true)}
	for range nGen {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		if err := r.c.Decode(0, r.pos, tok, func(int) bool { return true }); err != nil {
			return err
		}
		r.c.Synchronize()
		r.pos++
		tok[0] = r.token(false)
	}
	return nil
}
