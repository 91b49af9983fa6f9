//go:build linux && amd64

package sim

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
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

// TestFP16DirectReadsOnlyItsBlocks: the decode kernels (one group of 16
// channels, 1 to 4 rows) stage blocks in pairs, the next pair while
// summing the last, and an odd last block is paired with itself: for 1 to
// 6 blocks they give the documented sums and read no byte of B or A past
// the end (both end at an unreadable page).
func TestFP16DirectReadsOnlyItsBlocks(t *testing.T) {
	if !haveKernels {
		t.Skip("no AVX-512 kernels")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	kernels := []func(b []byte, kBlocks int, a []float32, lda int, c []float32, ldc int){
		fp16Direct1AVX512, fp16Direct2AVX512, fp16Direct3AVX512, fp16Direct4AVX512}
	for rows, kernel := range kernels {
		rows++
		for kBlocks := 1; kBlocks <= 6; kBlocks++ {
			K, N := 32*kBlocks, 16
			a, b := make([]float32, rows*K), make([]float32, K*N)
			for i := range a {
				a[i] = randHalf(rng)
			}
			for i := range b {
				b[i] = randHalf(rng)
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
			ag := guarded(t, 4*len(a))
			aa := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(ag))), len(a))
			copy(aa, a)
			c := make([]float32, rows*N)
			kernel(bn, kBlocks, aa, K, c, N)
			want := refBlock32(a, b, rows, K, N)
			for i := range want {
				if !sameBits(c[i], want[i]) {
					t.Fatalf("rows %d, %d blocks: C[%d] = %v, want %v", rows, kBlocks, i, c[i], want[i])
				}
			}
		}
	}
}
