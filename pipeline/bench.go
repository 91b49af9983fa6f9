package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/shard"

	"github.com/evalrun/evalrun/pipeline/summary"
)

// benchPass measures throughput one backend at a time, never overlapping, so
// no backend's figures include another's load. An interruption stops it.
func (r *runner) benchPass(ctx context.Context) {
	if r.ref != nil && r.ref.ok() && r.mine(shard.BenchUnit(r.ref.Name)) {
		r.refTput = r.benchBackend(ctx, r.ref)
		r.benchDone(ctx, r.ref.Name)
	}
	for _, c := range r.liveCands() {
		if r.mine(shard.BenchUnit(c.rb.Name)) {
			c.tput = r.benchBackend(ctx, c.rb)
			r.benchDone(ctx, c.rb.Name)
		}
	}
}

func (r *runner) benchBackend(ctx context.Context, rb *runBackend) *summary.Throughput {
	b := r.plan.Spec.Bench
	t := &summary.Throughput{}
	for _, req := range []backend.BenchRequest{{NPrompt: b.NPrompt}, {NGen: b.NGen}} {
		if req.NPrompt+req.NGen == 0 || ctx.Err() != nil || !rb.ok() {
			continue
		}
		req.Reps, req.Warmup, req.Seed = b.Reps, b.Warmup, 1
		fmt.Fprintf(r.opt.Stderr, "bench %s %s (%d reps)\n", rb.Name, req, req.Reps)
		cctx, cancel := context.WithTimeout(ctx, r.plan.Spec.Timeouts.Bench)
		t0 := time.Now()
		res, err := rb.be.Bench(cctx, req)
		if err == nil && len(res.SamplesNS) != req.Reps {
			err = fmt.Errorf("the plugin returned %d samples for %d repetitions", len(res.SamplesNS), req.Reps)
		}
		if err != nil {
			rb.fail(ctx, "bench "+req.String(), timedOut(cctx, r.plan.Spec.Timeouts.Bench, err))
			cancel()
			continue
		}
		cancel()
		bt := summary.NewBenchTest(req.NPrompt, req.NGen, res.SamplesNS)
		bt.HostS = time.Since(t0).Seconds()
		if req.NGen > 0 {
			t.TG = bt
		} else {
			t.PP = bt
		}
	}
	if t.PP == nil && t.TG == nil {
		return nil
	}
	t.Simulated = rb.info != nil && rb.info.Simulated()
	return t
}
