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

// RunBench measures one test as llama-bench does, for every plugin alike:
// an optional warm-up (the prompt, then one generated token), then Reps
// repetitions, each on a cleared cache: the prompt in chunks of nBatch
// tokens (test_prompt), then NGen single-token decodes, synchronized after
// each (test_gen). Tokens are random from a generator seeded with req.Seed,
// BOS first when bos >= 0.
func RunBench(ctx context.Context, req BenchRequest, d BenchDecoder, nVocab, nBatch int, bos int32) (BenchResult, error) {
	rng := rand.New(rand.NewPCG(uint64(req.Seed), 0x65766c72756e)) // "evlrun"
	token := func(first bool) int32 {
		if first && bos >= 0 {
			return bos
		}
		return int32(rng.IntN(nVocab))
	}
	// test runs after Reset: llama-bench clears the cache before it starts
	// a repetition's clock.
	test := func(nPrompt, nGen int) error {
		tokens := make([]int32, 0, min(nPrompt, nBatch))
		for done := 0; done < nPrompt; {
			if err := ctx.Err(); err != nil {
				return err
			}
			tokens = tokens[:0]
			for i := range min(nPrompt-done, nBatch) {
				tokens = append(tokens, token(done == 0 && i == 0))
			}
			if err := d.Decode(tokens); err != nil {
				return err
			}
			done += len(tokens)
		}
		d.Synchronize()
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
	res := BenchResult{NPrompt: req.NPrompt, NGen: req.NGen}
	if req.Warmup {
		d.Reset()
		start := time.Now()
		if err := test(req.NPrompt, min(req.NGen, 1)); err != nil {
			return BenchResult{}, err
		}
		res.WarmupNS = time.Since(start).Nanoseconds()
	}
	for range req.Reps {
		d.Reset()
		start := time.Now()
		if err := test(req.NPrompt, req.NGen); err != nil {
			return BenchResult{}, err
		}
		res.SamplesNS = append(res.SamplesNS, time.Since(start).Nanoseconds())
	}
	return res, nil
}
