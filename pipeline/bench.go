package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/metrics"
)

// benchPass measures throughput one backend at a time, never overlapping, so
// no backend's figures include another's load.
func (r *runner) benchPass(ctx context.Context) {
	if r.ref != nil && r.ref.ok() {
		r.refTput = r.benchBackend(ctx, r.ref)
	}
	for _, c := range r.liveCands() {
		c.tput = r.benchBackend(ctx, c.rb)
	}
}

func (r *runner) benchBackend(ctx context.Context, rb *runBackend) *Throughput {
	b := r.plan.Bench
	t := &Throughput{}
	if b.NPrompt > 0 {
		t.PP = r.benchTest(ctx, rb, backend.BenchRequest{NPrompt: b.NPrompt, Reps: b.Reps, Warmup: b.Warmup, Seed: 1})
	}
	if b.NGen > 0 && rb.ok() {
		t.TG = r.benchTest(ctx, rb, backend.BenchRequest{NGen: b.NGen, Reps: b.Reps, Warmup: b.Warmup, Seed: 1})
	}
	if t.PP == nil && t.TG == nil {
		return nil
	}
	return t
}

// BenchTestFromSamples computes llama-bench's statistics for one test.
func BenchTestFromSamples(nPrompt, nGen int, samples []int64) *BenchTest {
	avgNS, sdNS, avgTS, sdTS := metrics.BenchStats(samples, nPrompt+nGen)
	return &BenchTest{NPrompt: nPrompt, NGen: nGen, AvgNS: avgNS, StddevNS: sdNS, AvgTS: avgTS, StddevTS: sdTS, SamplesNS: samples}
}

func (r *runner) benchTest(ctx context.Context, rb *runBackend, req backend.BenchRequest) *BenchTest {
	name := fmt.Sprintf("pp%d", req.NPrompt)
	if req.NGen > 0 {
		name = fmt.Sprintf("tg%d", req.NGen)
	}
	fmt.Fprintf(r.opt.Stderr, "bench %s %s (%d reps)\n", rb.name, name, req.Reps)
	cctx, cancel := context.WithTimeout(ctx, r.plan.Timeouts.bench)
	defer cancel()
	t0 := time.Now()
	res, err := rb.be.Bench(cctx, req)
	if err != nil {
		rb.fail("bench "+name, timedOut(cctx, r.plan.Timeouts.bench, err))
		return nil
	}
	if len(res.SamplesNS) == 0 {
		rb.fail("bench "+name, fmt.Errorf("the plugin returned no samples"))
		return nil
	}
	bt := BenchTestFromSamples(req.NPrompt, req.NGen, res.SamplesNS)
	bt.HostS = time.Since(t0).Seconds()
	return bt
}
