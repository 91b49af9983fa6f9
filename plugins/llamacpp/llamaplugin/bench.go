package llamaplugin

import (
	"context"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/plugins/llamacpp/llama"
)

// Bench implements backend.Backend as llama-bench runs one test
// (backend.RunBench) in a fresh context of n_depth + n_prompt + n_gen cells
// with the Load settings. With a depth, its prompt is decoded before the
// first repetition's clock starts and the sequence's state kept
// (llama_state_seq_get_data), then set back before each later one
// (llama_state_seq_set_data), as llama-bench does. The first token is BOS
// when the vocabulary adds one. Eval sessions are not touched.
func (b *Backend) Bench(ctx context.Context, req backend.BenchRequest) (backend.BenchResult, error) {
	if err := req.Validate(); err != nil {
		return backend.BenchResult{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.model == nil {
		return backend.BenchResult{}, backend.Errorf(backend.ErrNotLoaded, "bench: no model loaded (call Load first)")
	}
	c, nBatch, err := b.benchContext(req)
	if err != nil {
		return backend.BenchResult{}, err
	}
	defer c.c.Free()
	return backend.RunBench(ctx, req, c, b.info.NVocab, nBatch, b.model.BOS())
}

// benchContext creates the context for req and the prompt chunk size.
func (b *Backend) benchContext(req backend.BenchRequest) (*benchContext, int, error) {
	nBatch := req.Batch()
	c, err := b.model.NewContext(llama.ContextParams{
		NCtx: req.NDepth + req.NPrompt + max(req.NGen, 1), NBatch: nBatch, NUBatch: min(nBatch, UBatch), NSeqMax: 1,
		Threads: b.threads, FlashAttn: b.opts.flashAttn, TypeK: b.opts.kvType, TypeV: b.opts.kvType, SWAFull: b.opts.SWAFull,
	})
	if err != nil {
		return nil, 0, err
	}
	return &benchContext{c: c}, min(nBatch, c.BatchCap()), nil
}

// benchContext is a llama context as a backend.BenchDecoder and
// backend.BenchCheckpointer.
type benchContext struct {
	c     *llama.Context
	pos   int
	state []byte // the checkpoint (llama_state_seq_get_data), nil: none
	mark  int    // its position
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

func (b *benchContext) Checkpoint() error {
	b.state, b.mark = b.c.SeqState(0), b.pos
	return nil
}

// Restore clears the memory and sets the checkpoint's state, as
// llama-bench does before a repetition at a depth it has decoded.
func (b *benchContext) Restore() bool {
	if b.state == nil {
		return false
	}
	b.c.Clear()
	if !b.c.SetSeqState(0, b.state) {
		return false
	}
	b.pos = b.mark
	return true
}
