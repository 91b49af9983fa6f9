package enginebackend

import (
	"context"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/engine"
)

// Bench implements backend.Backend the way llama-bench measures one test
// (backend.RunBench) on a session of its own: each prompt chunk one decode
// whose logits are computed for its last token only; with a depth, its
// prompt decoded before each repetition's clock starts (once, then the
// session truncated back to it). The first token is BOS when the model adds
// one. Eval sessions are not touched.
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
	return backend.RunBench(ctx, req, b.benchSession(req), b.model.Config.NVocab, req.Batch(), bos)
}

// benchSession is a session with room for req's depth and test.
func (b *Backend) benchSession(req backend.BenchRequest) *benchSession {
	return &benchSession{Session: b.model.NewSession(req.NDepth + req.NPrompt + max(req.NGen, 1)),
		window: b.model.Config.NSWA > 0, mark: -1}
}

// benchSession is an engine session as a backend.BenchDecoder and
// backend.BenchCheckpointer.
type benchSession struct {
	*engine.Session
	// window: the model has sliding-window layers, whose cache cells later
	// positions overwrite, so truncating does not restore a checkpoint.
	window bool
	mark   int // the checkpoint's position, -1: none
}

func (s *benchSession) Decode(tokens []int32) error {
	last := len(tokens) - 1
	return s.Session.Decode(tokens, func(i int) bool { return i == last }, func(int, []float32) error { return nil })
}

func (*benchSession) Synchronize() {}

// Checkpoint marks the current position: the cache rows before it stay
// as they are until Reset, since decoding only writes later positions.
func (s *benchSession) Checkpoint() error {
	s.mark = s.Pos()
	return nil
}

func (s *benchSession) Restore() bool {
	if s.mark < 0 || s.window || s.Pos() < s.mark {
		return false
	}
	s.Truncate(s.mark)
	return true
}
