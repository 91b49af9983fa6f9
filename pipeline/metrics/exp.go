package metrics

import (
	"math"
	"runtime"
	"sync"
)

// The log-softmaxes behind the KL divergence take one exponential per
// vocabulary entry: three to four passes over a 128k row per scored
// position, the bulk of the host's work at a Llama-3 vocabulary
// (docs/design-notes.md). expShifted
// computes them apart from the sums that use them, so that they can run on
// several cores and, on amd64 with AVX-512, eight at a time; every value is
// bit for bit math.Exp's, and the sums keep their sequential index order,
// so no figure changes.

// expShifted sets dst[i] = math.Exp(float64(src[i]) - shift). Long rows are
// split between goroutines (each element is computed alone: the split
// changes no bit).
func expShifted(dst []float64, src []float32, shift float64) {
	dst = dst[:len(src)]
	parts := min(runtime.GOMAXPROCS(0), len(src)/minExpPart)
	if parts <= 1 {
		expRange(dst, src, shift)
		return
	}
	var wg sync.WaitGroup
	step := (len(src)/parts + 7) &^ 7 // whole vector blocks per part
	for lo := 0; lo < len(src); lo += step {
		hi := min(lo+step, len(src))
		wg.Go(func() { expRange(dst[lo:hi], src[lo:hi], shift) })
	}
	wg.Wait()
}

// minExpPart is the shortest stretch worth a goroutine (measured:
// docs/design-notes.md).
const minExpPart = 8192

// expRange is expShifted on one goroutine: the vector kernel while its
// blocks of 8 stay in the range where it equals math.Exp, math.Exp for a
// block that does not (NaN, infinities, under- and overflow) and the tail.
func expRange(dst []float64, src []float32, shift float64) {
	for len(src) >= 8 {
		n := expBlocks(dst, src, shift)
		dst, src = dst[n:], src[n:]
		if len(src) < 8 {
			break
		}
		for i := range 8 {
			dst[i] = math.Exp(float64(src[i]) - shift)
		}
		dst, src = dst[8:], src[8:]
	}
	for i, v := range src {
		dst[i] = math.Exp(float64(v) - shift)
	}
}

// expBlocks is set per architecture: it computes whole blocks of 8 from the
// start while every argument of a block lies in [expLo, expHi], and returns
// how many elements it did (0 without a vector kernel).
var expBlocks = func(dst []float64, src []float32, shift float64) int { return 0 }

// The arguments the vector kernel takes: their results are normal numbers,
// so math.Exp's branches for NaN, infinities, overflow and subnormal
// results are never needed.
const (
	expLo = -708.0
	expHi = 708.0
)
