package sim

import (
	"slices"

	"github.com/evalrun/evalrun/plugins/internal/faults"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

var _ npu.CoreRunner = (*Driver)(nil)

// RunCores runs ctxs as the cores of one matmul: each as its Run would (the
// same checks, faults in the same run order, the same bits in C, counted
// alike), but the phases of all of them go to the host's threads together,
// one job per phase instead of one per core and phase: a matmul on three
// cores is one hand-over to the worker pool, not three, each of which ends
// with threads waiting for the last range. The
// contexts are locked in the order given (callers running overlapping sets
// from several goroutines must keep one order).
func (d *Driver) RunCores(ctxs []npu.Context) []error {
	const fn = "rknn_matmul_run"
	errs := make([]error, len(ctxs))
	type started struct {
		c      *Context
		run    faults.Run
		w      *workspace
		phases []phase
		finish func()
	}
	runs := make([]started, 0, len(ctxs))
	var shared decodedAs // the runs' workspaces stay theirs until all have finished
	defer func() {
		for _, r := range runs {
			d.putWork(r.w)
			r.c.mu.Unlock()
		}
	}()
	for i, x := range ctxs {
		c, ok := x.(*Context)
		switch {
		case !ok || c == nil || c.drv != d:
			errs[i] = rkErr(fn, npu.ErrCtxInvalid, "context %T was not created by this driver", x)
			continue
		case slices.Contains(ctxs[:i], x):
			errs[i] = rkErr(fn, npu.ErrParamInvalid, "context given twice")
			continue
		}
		c.mu.Lock()
		run, err := c.begin()
		if err != nil {
			c.mu.Unlock()
			errs[i] = err
			continue
		}
		w := d.getWork()
		phases, finish := c.plan(w, &shared)
		runs = append(runs, started{c, run, w, phases, finish})
	}
	macs, bBytes := 0, 0
	for _, r := range runs {
		m, b := r.c.work()
		macs, bBytes = macs+m, bBytes+b
	}
	inline := d.small(macs, bBytes)
	step := make([]phase, 0, len(runs))
	for j := 0; ; j++ {
		step = step[:0]
		more := false
		for _, r := range runs {
			if j < len(r.phases) {
				more = true
				if r.phases[j].n > 0 || r.phases[j].after != nil {
					step = append(step, r.phases[j])
				}
			}
		}
		if !more {
			break
		}
		if len(step) == 0 {
			continue
		}
		d.parallelPhases(step, inline)
		for _, p := range step {
			if p.after != nil {
				p.after()
			}
		}
	}
	for _, r := range runs {
		r.finish()
		r.c.end(r.run)
	}
	return errs
}

// parallelPhases runs the phases' ranges as one parallel job: phase i takes
// [off_i, off_i+n_i) of one index space, every off_i a multiple of 4, so
// each range handed out (bounds multiples of 4) meets each phase on bounds
// its own align (1, 2 or 4) divides. Inline, each phase is one call on
// this goroutine.
func (d *Driver) parallelPhases(ps []phase, inline bool) {
	if inline {
		for _, p := range ps {
			if p.n > 0 {
				p.fn(0, p.n)
			}
		}
		return
	}
	if len(ps) == 1 {
		if ps[0].n > 0 {
			d.parallel(ps[0].n, ps[0].align, ps[0].fn)
		}
		return
	}
	const align = 4
	offs := make([]int, len(ps))
	n := 0
	for i, p := range ps {
		offs[i] = n
		n += ceilDiv(p.n, align) * align
	}
	last := len(ps) - 1
	n = offs[last] + ps[last].n
	d.parallel(n, align, func(lo, hi int) {
		for i, p := range ps {
			if l, h := max(lo, offs[i]), min(hi, offs[i]+p.n); l < h {
				p.fn(l-offs[i], h-offs[i])
			}
		}
	})
}
