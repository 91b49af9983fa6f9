//go:build linux && amd64

package sim

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/x448/float16"
)

// guarded returns n bytes that end where an unreadable page begins, so a
// kernel reading past them faults.
func guarded(t *testing.T, n int) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[size:], syscall.PROT_NONE); err != nil {
		t.Skip(err)
	}
	return mem[size-n : size]
}

// guardedFloats is guarded for n float32s.
func guardedFloats(t *testing.T, n int) []float32 {
	b := guarded(t, 4*n)
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// specialHalf is, one time in 8, a zero, subnormal, infinity or NaN (fp16),
// else randHalf's ordinary values.
func specialHalf(rng *rand.Rand) float32 {
	if rng.IntN(8) != 0 {
		return randHalf(rng)
	}
	specials := []uint16{0x0000, 0x8000, 0x0001, 0x83ff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe55}
	return float16.Frombits(specials[rng.IntN(len(specials))]).Float32()
}

// TestFP16DirectReadsOnlyItsBlocks: the decode kernels (one group of 16
// channels, 1 to 4 rows) stage blocks in pairs, the next pair while
// summing the last, and an odd last block is paired with itself: for 1 to
// 6, 9 and 256 blocks (K 8192, the most a decode-sized run has), row
// strides of A and C wider than the row, and zeros, subnormals, infinities
// and NaNs among the values, they give the documented sums (NaN where the
// reference is NaN: its sign and payload are not specified), read no byte
// of B or A past the end and write only C's 16 values a row (all three end
// at an unreadable page; C's gaps hold a canary).
func TestFP16DirectReadsOnlyItsBlocks(t *testing.T) {
	if !haveKernels {
		t.Skip("no AVX-512 kernels")
	}
	const canary = 0x7fa5a5a5
	rng := rand.New(rand.NewPCG(5, 6))
	kernels := []func(b []byte, kBlocks int, a []float32, lda int, c []float32, ldc int){
		fp16Direct1AVX512, fp16Direct2AVX512, fp16Direct3AVX512, fp16Direct4AVX512}
	for rows, kernel := range kernels {
		rows++
		for _, kBlocks := range []int{1, 2, 3, 4, 5, 6, 9, 256} {
			for _, pad := range [][2]int{{0, 0}, {3, 5}, {37, 33}} {
				K, N := 32*kBlocks, 16
				lda, ldc := K+pad[0], N+pad[1]
				a, b := make([]float32, rows*K), make([]float32, K*N)
				for i := range a {
					a[i] = specialHalf(rng)
				}
				for i := range b {
					b[i] = specialHalf(rng)
				}
				// Native B of one group: block kb, channel n, k%32.
				bn := guarded(t, 2*K*N)
				for k := range K {
					for n := range N {
						h := npu.F32ToF16(b[k*N+n])
						off := 2 * (k/32*512 + n*32 + k%32)
						bn[off], bn[off+1] = byte(h), byte(h>>8)
					}
				}
				aa := guardedFloats(t, (rows-1)*lda+K)
				for m := range rows {
					copy(aa[m*lda:], a[m*K:(m+1)*K])
				}
				c := guardedFloats(t, (rows-1)*ldc+N)
				for i := range c {
					c[i] = math.Float32frombits(canary)
				}
				kernel(bn, kBlocks, aa, lda, c, ldc)
				want := refBlock32(a, b, rows, K, N)
				for i, v := range c {
					m, n := i/ldc, i%ldc
					if n >= N {
						if math.Float32bits(v) != canary {
							t.Fatalf("rows %d, %d blocks, ldc %d: wrote C[%d], between rows", rows, kBlocks, ldc, i)
						}
						continue
					}
					w := want[m*N+n]
					if w != w && v != v {
						continue
					}
					if !sameBits(v, w) {
						t.Fatalf("rows %d, %d blocks, lda %d: C[%d][%d] = %v (%#x), want %v (%#x)", rows, kBlocks, lda, m, n, v, math.Float32bits(v), w, math.Float32bits(w))
					}
				}
			}
		}
	}
}
