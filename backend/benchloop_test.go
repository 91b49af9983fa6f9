package backend

import (
	"context"
	"errors"
	"reflect"
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

// cacheDecoder is a decoder with a position: it records where each decode
// starts and how many tokens it takes, and a decode that starts below slow
// (the depth prompt) takes 50 ms.
type cacheDecoder struct {
	pos, slow int
	decodes   [][2]int // {position, tokens}
	resets    int
}

func (d *cacheDecoder) Reset() { d.pos = 0; d.resets++ }
func (d *cacheDecoder) Decode(tokens []int32) error {
	if d.pos < d.slow {
		time.Sleep(50 * time.Millisecond)
	}
	d.decodes = append(d.decodes, [2]int{d.pos, len(tokens)})
	d.pos += len(tokens)
	return nil
}
func (d *cacheDecoder) Synchronize() {}

// checkpointDecoder can go back to a checkpoint (llama-bench's saved state).
type checkpointDecoder struct {
	cacheDecoder
	mark, restores int
}

func (d *checkpointDecoder) Checkpoint() error { d.mark = d.pos; return nil }
func (d *checkpointDecoder) Restore() bool     { d.pos = d.mark; d.restores++; return true }

// With a depth, each repetition's timed prompt and generated tokens start
// at position n_depth: the depth prompt (BOS first, in n_batch chunks) is
// decoded before the clock starts, so its time is not counted. The warm-up
// runs without it, as llama-bench's does.
func TestRunBenchDepthIsInTheCacheBeforeTheClock(t *testing.T) {
	req := BenchRequest{NPrompt: 3, NGen: 2, NDepth: 6, Reps: 2, Warmup: true}
	d := &cacheDecoder{slow: 6}
	res, err := RunBench(context.Background(), req, d, 100, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	warmup := [][2]int{{0, 3}, {3, 1}}
	rep := [][2]int{{0, 4}, {4, 2}, {6, 3}, {9, 1}, {10, 1}}
	want := append(append(append([][2]int{}, warmup...), rep...), rep...)
	if !reflect.DeepEqual(d.decodes, want) {
		t.Errorf("decodes {position, tokens}:\n got %v\nwant %v", d.decodes, want)
	}
	if res.NDepth != 6 || len(res.SamplesNS) != 2 {
		t.Fatalf("result %+v", res)
	}
	for _, ns := range res.SamplesNS {
		if ns >= int64(50*time.Millisecond) {
			t.Errorf("a repetition took %v: the depth prompt was timed", time.Duration(ns))
		}
	}

	// A decoder that keeps a checkpoint decodes the depth once and is
	// restored to it before the next repetition.
	c := &checkpointDecoder{}
	if _, err := RunBench(context.Background(), BenchRequest{NGen: 2, NDepth: 6, Reps: 3}, c, 100, 4, 1); err != nil {
		t.Fatal(err)
	}
	tg := [][2]int{{6, 1}, {7, 1}}
	want = append(append(append([][2]int{{0, 4}, {4, 2}}, tg...), tg...), tg...)
	if !reflect.DeepEqual(c.decodes, want) || c.restores != 2 || c.resets != 1 {
		t.Errorf("with a checkpoint: %d resets, %d restores, decodes\n got %v\nwant %v", c.resets, c.restores, c.decodes, want)
	}
}

// Test names are llama-bench's, a depth included.
func TestBenchRequestNames(t *testing.T) {
	for req, want := range map[BenchRequest]string{
		{NPrompt: 512}:                       "pp512",
		{NGen: 128}:                          "tg128",
		{NPrompt: 512, NGen: 128}:            "pp512+tg128",
		{NPrompt: 512, NDepth: 4096}:         "pp512 @ d4096",
		{NGen: 128, NDepth: 4096}:            "tg128 @ d4096",
		{NPrompt: 16, NGen: 8, NDepth: 1024}: "pp16+tg8 @ d1024",
	} {
		if got := req.String(); got != want {
			t.Errorf("%+v: %q, want %q", req, got, want)
		}
	}
	if err := (BenchRequest{NGen: 1, Reps: 1, NDepth: -1}).Validate(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative n_depth: %v", err)
	}
}
