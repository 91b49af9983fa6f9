package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// runCovers runs one job and checks that every index of [0, n) was passed
// to fn exactly once, in ranges that start on a multiple of align.
func runCovers(t *testing.T, p *Pool, n, align int) {
	t.Helper()
	hits := make([]atomic.Int32, n)
	var calls atomic.Int32
	var bad atomic.Value
	p.RunAligned(n, align, func(lo, hi int) {
		calls.Add(1)
		if lo%max(align, 1) != 0 || lo >= hi || hi > n {
			bad.Store(fmt.Sprintf("range [%d, %d) of n=%d align=%d", lo, hi, n, align))
		}
		for i := lo; i < hi; i++ {
			hits[i].Add(1)
		}
	})
	if b := bad.Load(); b != nil {
		t.Fatalf("bad %s", b)
	}
	for i := range hits {
		if h := hits[i].Load(); h != 1 {
			t.Fatalf("n=%d align=%d threads=%d: index %d computed %d times", n, align, p.Threads(), i, h)
		}
	}
	if n > 0 && calls.Load() == 0 {
		t.Fatalf("n=%d: fn never called", n)
	}
}

func TestPoolCoversEveryIndexOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 2, 7, 16, 17, 100, 768, 2048, 32000} {
			for _, align := range []int{0, 1, 16} {
				runCovers(t, p, n, align)
			}
		}
		p.Close()
		p.Close() // idempotent
	}
}

// Workers that parked (no job for longer than their spin) still wake up
// for the next job, and the pool can run many jobs in a row.
func TestPoolWakesParkedWorkers(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	runCovers(t, p, 1000, 1)
	time.Sleep(3 * poolSpin) // the workers park
	var worked sync.Map
	for range 200 {
		p.Run(64, func(lo, hi int) {
			worked.Store(lo, true)
			time.Sleep(10 * time.Microsecond)
		})
	}
	n := 0
	worked.Range(func(any, any) bool { n++; return true })
	if n < 2 {
		t.Fatalf("only %d distinct ranges ran", n)
	}
	runCovers(t, p, 1000, 16)
}

// Runs from several goroutines at once, and a Run inside fn, finish and
// cover their ranges (a Run that finds the workers busy runs on its caller).
func TestPoolConcurrentAndNestedRuns(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				n := 10 + 37*g + i
				var sum atomic.Int64
				p.Run(n, func(lo, hi int) {
					p.Run(hi-lo, func(a, b int) {
						for j := a; j < b; j++ {
							sum.Add(int64(lo + j))
						}
					})
				})
				if want := int64(n * (n - 1) / 2); sum.Load() != want {
					t.Errorf("goroutine %d run %d: sum %d, want %d", g, i, sum.Load(), want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
