//go:build amd64

package metrics

import "golang.org/x/sys/cpu"

// On amd64 math.Exp is the assembly in the standard library (Shibata's
// method: Taylor series of x/16, squared four times), its FMA variant on a
// CPU with AVX and FMA. expAVX512 is the same sequence of operations on
// eight lanes, so it returns math.Exp's bits; it needs that FMA variant
// (every AVX-512 CPU has FMA) and AVX-512F.
func init() {
	x := cpu.X86
	if x.HasAVX512F && x.HasAVX && x.HasFMA {
		expBlocks = func(dst []float64, src []float32, shift float64) int {
			n := min(len(dst), len(src)) &^ 7
			if n == 0 {
				return 0
			}
			return expAVX512(&dst[0], &src[0], n, shift)
		}
	}
}

// expAVX512 sets dst[i] = exp(float64(src[i]) - shift) for i < n (a
// multiple of 8), block by block, and stops before the first block with an
// argument outside [expLo, expHi]; it returns the elements done.
//
//go:noescape
func expAVX512(dst *float64, src *float32, n int, shift float64) int
