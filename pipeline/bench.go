package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/pipeline/resultsdir"
	"github.com/evalrun/evalrun/pipeline/speedstat"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// benched is one backend's throughput being measured: the samples of each
// test (pp, tg) so far and where the result goes.
type benched struct {
	rb      *runBackend
	out     **summary.Throughput
	samples [2][]int64
	hostS   [2]float64
}

// benchPass measures throughput in rounds: each round runs one repetition
// of every test on every backend in turn (backends never overlap), so a
// backend's repetitions spread over the whole pass and every backend samples
// the machine's state alike (run back to back, they would share a fraction
// of a second of it). The order within a round is shuffled, the same for
// every run (roundOrder), so no backend always takes the place after the
// simulated NPU's turn, which measures slower (docs/design-notes.md).
// Each round is a Bench call with its own warm-up (the plugin measures in a
// fresh session, as llama-bench does per test). An interruption or a crash
// keeps the repetitions measured so far (stats.n says how many); only a
// backend that finished every round has its bench unit recorded for
// --resume.
func (r *runner) benchPass(ctx context.Context) {
	var all []*benched
	if r.ref != nil && r.ref.ok() && r.mine(resultsdir.BenchUnit(r.ref.Name)) {
		all = append(all, &benched{rb: r.ref, out: &r.refTput})
	}
	for _, c := range r.liveCands() {
		if r.mine(resultsdir.BenchUnit(c.rb.Name)) {
			all = append(all, &benched{rb: c.rb, out: &c.tput})
		}
	}
	b := r.plan.Spec.Bench
	tests := [2]backend.BenchRequest{{NPrompt: b.NPrompt}, {NGen: b.NGen}}
	if len(all) == 0 {
		return
	}
	rbs := make([]*runBackend, len(all))
	for i, m := range all {
		rbs[i] = m.rb
	}
	ph := r.startPhase("bench "+backend.BenchRequest{NPrompt: b.NPrompt, NGen: b.NGen}.String(), "rounds", "", b.Reps, b.Reps, rbs)
	for round := 0; round < b.Reps && ctx.Err() == nil; round++ {
		for _, k := range roundOrder(round, len(all)) {
			m := all[k]
			ph.benching(m.rb.Name)
			for i, req := range tests {
				if req.NPrompt+req.NGen == 0 || ctx.Err() != nil || !m.rb.ok() {
					continue
				}
				req.Reps, req.Warmup, req.Seed = 1, b.Warmup, int64(1+round)
				if !r.benchOnce(ctx, m, i, req) {
					break
				}
			}
		}
		ph.done(1)
	}
	ph.finish(ctx.Err() != nil)
	for _, m := range all {
		*m.out = m.throughput(tests)
		if m.rb.ok() {
			r.benchDone(ctx, m.rb.Name) // not recorded when interrupted
		}
	}
}

// roundOrder is the order of n backends in bench round round: a
// permutation drawn from a generator seeded by the round alone, so every
// backend takes each place and follows each other backend about equally
// often, and two runs of a spec bench in the same order.
func roundOrder(round, n int) []int {
	return rand.New(rand.NewPCG(uint64(round), 0x65766c72756e)).Perm(n)
}

// benchOnce runs one round of test i on m's backend; false when the backend
// failed (it is then marked and skipped in later rounds).
func (r *runner) benchOnce(ctx context.Context, m *benched, i int, req backend.BenchRequest) bool {
	limit := r.plan.Spec.Timeouts.Bench
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t0 := time.Now()
	res, err := m.rb.be.Bench(cctx, req)
	if err == nil && len(res.SamplesNS) != req.Reps {
		err = fmt.Errorf("the plugin returned %d samples for %d repetitions", len(res.SamplesNS), req.Reps)
	}
	if err == nil {
		err = checkSamples(res.SamplesNS, limit)
	}
	if err != nil {
		m.rb.fail(ctx, "bench "+req.String(), timedOut(cctx, limit, err))
		return false
	}
	m.samples[i] = append(m.samples[i], res.SamplesNS...)
	m.hostS[i] += time.Since(t0).Seconds()
	return true
}

// checkSamples refuses timings no plugin can have measured: a repetition
// of 0 ns or less, or longer than the call's time limit (alone or all
// together).
func checkSamples(samples []int64, limit time.Duration) error {
	var sum int64
	for i, ns := range samples {
		if ns <= 0 || ns > limit.Nanoseconds() {
			return fmt.Errorf("the plugin reported an impossible time for repetition %d: %d ns (want > 0 and within the bench time limit of %s)", i+1, ns, limit)
		}
		if sum += ns; sum > limit.Nanoseconds() {
			return fmt.Errorf("the plugin reported repetitions totalling more than the bench time limit of %s", limit)
		}
	}
	return nil
}

func (m *benched) throughput(tests [2]backend.BenchRequest) *summary.Throughput {
	t := &summary.Throughput{Simulated: m.rb.info != nil && m.rb.info.Simulated()}
	for i, req := range tests {
		if len(m.samples[i]) == 0 {
			continue
		}
		bt := speedstat.NewBenchTest(req.NPrompt, req.NGen, m.samples[i])
		bt.HostS = m.hostS[i]
		if req.NGen > 0 {
			t.TG = bt
		} else {
			t.PP = bt
		}
	}
	if t.PP == nil && t.TG == nil {
		return nil
	}
	return t
}
