package engine

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a set of persistent worker goroutines that run row ranges of one
// job in parallel. Callers split work by output rows only, so every value is
// computed by exactly one goroutine in a fixed order: results do not depend
// on the number of threads.
type Pool struct {
	threads int
	tasks   chan poolTask
	once    sync.Once
	wg      sync.WaitGroup
}

type poolTask struct {
	fn     func(lo, hi int)
	lo, hi int
	job    *poolJob
}

type poolJob struct {
	remaining atomic.Int32
	done      chan struct{}
}

func (t poolTask) run() {
	t.fn(t.lo, t.hi)
	if t.job.remaining.Add(-1) == 0 {
		close(t.job.done)
	}
}

// NewPool starts threads-1 workers (the caller of Run is the last thread).
// threads <= 0 means runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, tasks: make(chan poolTask, threads)}
	for i := 1; i < threads; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for t := range p.tasks {
				t.run()
			}
		}()
	}
	return p
}

// Threads is the number of threads Run uses, the caller's included.
func (p *Pool) Threads() int { return p.threads }

// Run calls fn over [0, n) split into at most Threads() contiguous ranges and
// returns when all of them are done. It is safe to call from several
// goroutines, and from inside fn: a waiting caller runs queued ranges itself.
func (p *Pool) Run(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	chunks := min(p.threads, n)
	if chunks == 1 {
		fn(0, n)
		return
	}
	job := &poolJob{done: make(chan struct{})}
	job.remaining.Store(int32(chunks))
	for c := 1; c < chunks; c++ {
		p.submit(poolTask{fn: fn, lo: c * n / chunks, hi: (c + 1) * n / chunks, job: job})
	}
	poolTask{fn: fn, lo: 0, hi: n / chunks, job: job}.run()
	for {
		select {
		case <-job.done:
			return
		case t := <-p.tasks:
			t.run()
		}
	}
}

// submit queues t; while the queue is full the caller runs queued tasks
// itself, so nested or concurrent Runs cannot deadlock.
func (p *Pool) submit(t poolTask) {
	for {
		select {
		case p.tasks <- t:
			return
		case other := <-p.tasks:
			other.run()
		}
	}
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	p.once.Do(func() {
		close(p.tasks)
		p.wg.Wait()
	})
}
