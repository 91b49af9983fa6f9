package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a set of persistent worker goroutines that run row ranges of one
// job in parallel. Callers split work by output rows only, so every value is
// computed by exactly one goroutine in a fixed order: results do not depend
// on the number of threads or on which goroutine claims which range.
//
// A decode step runs many small jobs (a matmul, or the matmuls that read
// the same activations, an attention). Handing each to a parked goroutine
// costs a futex wake-up that can take longer than the job, and the Go
// scheduler tends to run the woken goroutine after the caller instead of
// beside it. So workers spin (yielding their P to any other runnable
// goroutine) for a while after a job before they park, the ranges are
// claimed dynamically from a shared counter, large ones first and small
// ones last, so a late or preempted worker never holds the others up, and
// the caller works on the job too.
type Pool struct {
	threads int
	spin    bool // GOMAXPROCS leaves room for the workers to spin

	active atomic.Pointer[poolJob] // the job workers help with, nil if none
	gen    atomic.Uint64           // bumped for every published job
	busy   atomic.Bool             // a Run owns active

	workers []*poolWorker
	closed  atomic.Bool
	wg      sync.WaitGroup
}

// poolJob is one Run over [0, n): goroutines claim ranges from next, each
// a share of what is left (guided self-scheduling), so the first ranges are
// large and the last ones small: the threads finish close together.
type poolJob struct {
	fn      func(lo, hi int)
	n       int
	align   int
	divisor int           // a claim takes 1/divisor of the rows left
	next    atomic.Int64  // the first row not yet claimed
	done    atomic.Int64  // rows computed
	wake    chan struct{} // closed when done reaches n if the caller parks
	parked  atomic.Bool   // the caller waits on wake
}

type poolWorker struct {
	parked atomic.Bool
	wake   chan struct{} // one token per wake-up
}

// poolSpin is how long an idle worker keeps looking for a job before it
// parks: long enough to span the serial parts of a decode step (norms, rope,
// the host's handling of a token), short enough not to burn a core between
// requests.
const poolSpin = 200 * time.Microsecond

// poolWaitSpin is how long Run's caller spins for the last ranges of its
// job before it parks (a worker the OS preempted mid-range).
const poolWaitSpin = 50 * time.Microsecond

// spinYield is how many checks of an atomic a spinning goroutine makes
// between yields of its P (a few microseconds): often enough for the
// scheduler's other goroutines, rarely enough not to slow the hand-over.
const spinYield = 256

// NewPool starts threads-1 workers (the caller of Run is the last thread).
// threads <= 0 means runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, spin: runtime.GOMAXPROCS(0) >= threads}
	for i := 1; i < threads; i++ {
		w := &poolWorker{wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		p.wg.Add(1)
		go p.work(w)
	}
	return p
}

// Threads is the number of threads Run uses, the caller's included.
func (p *Pool) Threads() int { return p.threads }

// Run calls fn over [0, n) split into contiguous ranges, each passed to one
// call, and returns when all of them are done. It is safe to call from
// several goroutines and from inside fn: a Run that finds the workers busy
// with another job runs its ranges on the calling goroutine.
func (p *Pool) Run(n int, fn func(lo, hi int)) { p.RunAligned(n, 1, fn) }

// RunAligned is Run with every range boundary a multiple of align (but the
// end, n), for kernels that process rows in groups.
func (p *Pool) RunAligned(n, align int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	align = max(align, 1)
	if p.threads == 1 || n <= align || !p.busy.CompareAndSwap(false, true) {
		fn(0, n)
		return
	}
	j := &poolJob{fn: fn, n: n, align: align, divisor: 2 * p.threads}
	p.active.Store(j)
	p.gen.Add(1)
	for _, w := range p.workers {
		if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	j.help()
	p.active.Store(nil)
	p.busy.Store(false)
	j.wait()
}

// help claims and runs ranges until none is left.
func (j *poolJob) help() {
	for {
		lo := int(j.next.Load())
		if lo >= j.n {
			return
		}
		size := (j.n - lo + j.divisor - 1) / j.divisor
		hi := min((lo+size+j.align-1)/j.align*j.align, j.n)
		if !j.next.CompareAndSwap(int64(lo), int64(hi)) {
			continue
		}
		j.fn(lo, hi)
		if j.done.Add(int64(hi-lo)) == int64(j.n) && j.parked.Load() {
			close(j.wake)
		}
	}
}

// wait returns when every range is done: spinning while the last ones are
// computed, parking if that takes long (a worker the OS preempted).
func (j *poolJob) wait() {
	var start time.Time
	for i := 0; j.done.Load() < int64(j.n); i++ {
		if i%spinYield != spinYield-1 {
			continue
		}
		// Bounded in time, not checks: under emulation (the arm64 tests
		// under qemu) or on a loaded machine a check costs far more.
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > poolWaitSpin {
			break
		}
		runtime.Gosched()
	}
	if j.done.Load() == int64(j.n) {
		return
	}
	j.wake = make(chan struct{})
	j.parked.Store(true)
	if j.done.Load() == int64(j.n) {
		return
	}
	<-j.wake
}

// work is a worker's loop: help with the active job, spin for the next one,
// park when none comes.
func (p *Pool) work(w *poolWorker) {
	defer p.wg.Done()
	var seen uint64
	for !p.closed.Load() {
		if g := p.gen.Load(); g != seen {
			seen = g
			if j := p.active.Load(); j != nil {
				j.help()
			}
			continue
		}
		if p.spin && p.spinFor(seen) {
			continue
		}
		w.parked.Store(true)
		if p.gen.Load() != seen || p.closed.Load() {
			// A job or Close came while parking: take back the parked
			// flag, or consume the token of whoever already did.
			if !w.parked.CompareAndSwap(true, false) {
				<-w.wake
			}
			continue
		}
		<-w.wake
	}
}

// spinFor yields until the job generation moves past seen (true) or
// poolSpin passes (false).
func (p *Pool) spinFor(seen uint64) bool {
	start := time.Now()
	for i := 1; ; i++ {
		if p.gen.Load() != seen || p.closed.Load() {
			return true
		}
		if i%spinYield == 0 {
			runtime.Gosched()
			if time.Since(start) > poolSpin {
				return false
			}
		}
	}
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	for _, w := range p.workers {
		if w.parked.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	p.wg.Wait()
}
