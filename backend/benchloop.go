package backend

import (
	"context"
	"math/rand/v2"
	"time"
)

// BenchDecoder is one model context that RunBench drives.
type BenchDecoder interface {
	// Reset clears the cache: the next Decode starts at position 0.
	Reset()
	// Decode evaluates tokens after those already decoded, with logits for
	// the last one only (llama_batch_get_one).
	Decode(tokens []int32) error
	// Synchronize waits for decodes still running (llama_synchronize); a
	// synchronous decoder does nothing.
	Synchronize()
}

// BenchCheckpointer is a BenchDecoder that can keep its cache as it is after
// the depth prompt and go back to it, as llama-bench keeps the context's
// state (llama_state_seq_get_data / set_data): the depth prompt is then
// decoded once per test instead of before every repetition.
type BenchCheckpointer interface {
	// Checkpoint keeps the cache as it is now.
	Checkpoint() error
	// Restore replaces the cache with the checkpoint's; false: it cannot,
	// and RunBench resets the cache and decodes the depth again.
	Restore() bool
}

// RunBench measures one test as llama-bench does, for every plugin alike:
// an optional warm-up (the prompt, then one generated token), then Reps
// repetitions, each on a cleared cache: the depth prompt of req.NDepth
// tokens outside the clock (decoded once and restored for later
// repetitions by a BenchCheckpointer), then, timed, the prompt in chunks of
// nBatch tokens (test_prompt) and NGen single-token decodes, synchronized
// after each (test_gen). Tokens are random from a generator seeded with
// req.Seed, BOS first (of each prompt, and the first generated token) when
// bos >= 0.
func RunBench(ctx context.Context, req BenchRequest, d BenchDecoder, nVocab, nBatch int, bos int32) (BenchResult, error) {
	rng := rand.New(rand.NewPCG(uint64(req.Seed), 0x65766c72756e)) // "evlrun"
	token := func(first bool) int32 {
		if first && bos >= 0 {
			return bos
		}
		return int32(rng.IntN(nVocab))
	}
	prompt := func(n int) error {
		tokens := make([]int32, 0, min(n, nBatch))
		for done := 0; done < n; {
			if err := ctx.Err(); err != nil {
				return err
			}
			tokens = tokens[:0]
			for i := range min(n-done, nBatch) {
				tokens = append(tokens, token(done == 0 && i == 0))
			}
			if err := d.Decode(tokens); err != nil {
				return err
			}
			done += len(tokens)
		}
		d.Synchronize()
		return nil
	}
	// test runs after Reset (and the depth): llama-bench clears the cache
	// and decodes the depth before it starts a repetition's clock.
	test := func(nPrompt, nGen int) error {
		if err := prompt(nPrompt); err != nil {
			return err
		}
		tok := []int32{token(true)}
		for range nGen {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := d.Decode(tok); err != nil {
				return err
			}
			d.Synchronize()
			tok[0] = token(false)
		}
		return nil
	}
	cp, _ := d.(BenchCheckpointer)
	checkpointed := false
	// depth leaves the depth prompt in the cache.
	depth := func() error {
		if checkpointed && cp.Restore() {
			return nil
		}
		d.Reset()
		if req.NDepth == 0 {
			return nil
		}
		if err := prompt(req.NDepth); err != nil {
			return err
		}
		if cp != nil {
			if err := cp.Checkpoint(); err != nil {
				return err
			}
			checkpointed = true
		}
		return nil
	}
	res := BenchResult{NPrompt: req.NPrompt, NGen: req.NGen, NDepth: req.NDepth}
	if req.Warmup {
		d.Reset()
		start := time.Now()
		if err := test(req.NPrompt, min(req.NGen, 1)); err != nil {
			return BenchResult{}, err
		}
		res.WarmupNS = time.Since(start).Nanoseconds()
	}
	for range req.Reps {
		if err := depth(); err != nil {
			return BenchResult{}, err
		}
		start := time.Now()
		if err := test(req.NPrompt, req.NGen); err != nil {
			return BenchResult{}, err
		}
		res.SamplesNS = append(res.SamplesNS, time.Since(start).Nanoseconds())
	}
	return res, nil
}
