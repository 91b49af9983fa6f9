package backend

import (
	"context"
	"testing"
	"time"
)

// slowReset is a decoder whose cache clear takes far longer than its
// decodes (a large KV cache zeroed), counting what RunBench asks of it.
type slowReset struct{ resets, decodes, tokens int }

func (d *slowReset) Reset() { d.resets++; time.Sleep(50 * time.Millisecond) }
func (d *slowReset) Decode(tokens []int32) error {
	d.decodes++
	d.tokens += len(tokens)
	return nil
}
func (d *slowReset) Synchronize() {}

// A repetition is timed as llama-bench times it: the cache is cleared
// before the clock starts, so a slow clear is not counted as prompt or
// generation time. Each repetition (and the warm-up) starts from an empty
// cache and decodes the prompt in batches, then one token at a time.
func TestRunBenchClearsTheCacheOutsideTheClock(t *testing.T) {
	d := &slowReset{}
	res, err := RunBench(context.Background(), BenchRequest{NPrompt: 10, NGen: 3, Reps: 2, Warmup: true}, d, 100, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.resets != 3 || d.decodes != 3*(3+3)-2 || d.tokens != 10+1+2*(10+3) {
		t.Fatalf("resets %d decodes %d tokens %d", d.resets, d.decodes, d.tokens)
	}
	for _, ns := range res.SamplesNS {
		if ns >= int64(50*time.Millisecond) {
			t.Errorf("a repetition took %v: the cache clear was timed", time.Duration(ns))
		}
	}
}
