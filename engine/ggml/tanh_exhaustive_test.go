package ggml

import (
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/evalrun/evalrun/engine/cmath"
)

// TestTanhExhaustive compares tanhfAVX512 with cmath.Tanhf on all 2^32
// inputs (minutes: only with EVALRUN_TANH_EXHAUSTIVE=1).
func TestTanhExhaustive(t *testing.T) {
	if os.Getenv("EVALRUN_TANH_EXHAUSTIVE") == "" || tanhFast == nil {
		t.Skip("EVALRUN_TANH_EXHAUSTIVE=1 and AVX-512 to run")
	}
	var diffs, first atomic.Uint64
	first.Store(math.MaxUint64)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	const chunk = 1 << 16
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, chunk)
			for c := uint64(w); c < 1<<32/chunk; c += uint64(workers) {
				base := uint32(c * chunk)
				for i := range buf {
					buf[i] = math.Float32frombits(base + uint32(i))
				}
				tanhFast(buf)
				for i, v := range buf {
					x := math.Float32frombits(base + uint32(i))
					if math.Float32bits(v) != math.Float32bits(cmath.Tanhf(x)) {
						if diffs.Add(1) <= 20 {
							t.Errorf("tanh(%#08x = %g) = %#08x, want %#08x", base+uint32(i), x, math.Float32bits(v), math.Float32bits(cmath.Tanhf(x)))
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d differences over 2^32 inputs", diffs.Load())
}
