package llamaplugin

import (
	"context"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/plugins/llamacpp/llama"
)

// Bench implements backend.Backend as llama-bench runs one test
// (backend.RunBench) in a fresh context of n_prompt + n_gen cells with the
// Load settings. The first token is BOS when the vocabulary adds one. Eval
// sessions are not touched.
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
		Threads: b.threads, FlashAttn: b.opts.flashAttn, TypeK: b.opts.kvType, TypeV: b.opts.kvType, SWAFull: b.opts.SWAFull,
	})
	if err != nil {
		return backend.BenchResult{}, err
	}
	defer c.Free()
	return backend.RunBench(ctx, req, &benchContext{c: c}, b.info.NVocab, min(nBatch, c.BatchCap()), b.model.BOS())
}

// benchContext is a llama context as a backend.BenchDecoder.
type benchContext struct {
	c   *llama.Context
	pos int
}

func (b *benchContext) Reset() { b.c.Clear(); b.pos = 0 }

func (b *benchContext) Synchronize() { b.c.Synchronize() }

func (b *benchContext) Decode(tokens []int32) error {
	last := len(tokens) - 1
	if err := b.c.Decode(0, b.pos, tokens, func(i int) bool { return i == last }); err != nil {
		return err
	}
	b.pos += len(tokens)
	return nil
}
