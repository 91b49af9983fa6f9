package enginebackend

import (
	"context"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
)

// Bench implements backend.Backend the way llama-bench measures one test
// (backend.RunBench) on a session of its own: each prompt chunk one decode
// whose logits are computed for its last token only. The first token is BOS
// when the model adds one. Eval sessions are not touched.
func (b *Backend) Bench(ctx context.Context, req backend.BenchRequest) (backend.BenchResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := req.Validate(); err != nil {
		return backend.BenchResult{}, err
	}
	if b.model == nil {
		return backend.BenchResult{}, backend.Errorf(backend.ErrNotLoaded, "bench: no model loaded (call Load first)")
	}
	bos := int32(-1)
	if t := b.model.Tokenizer(); t != nil && t.AddBOS() {
		bos = warmupToken(b.model)
	}
	s := benchSession{b.model.NewSession(req.NPrompt + max(req.NGen, 1))}
	return backend.RunBench(ctx, req, s, b.model.Config.NVocab, req.Batch(), bos)
}

// benchSession is an engine session as a backend.BenchDecoder.
type benchSession struct{ *engine.Session }

func (s benchSession) Decode(tokens []int32) error {
	last := len(tokens) - 1
	return s.Session.Decode(tokens, func(i int) bool { return i == last }, func(int, []float32) error { return nil })
}

func (benchSession) Synchronize() {}
