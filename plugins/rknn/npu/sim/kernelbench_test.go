//go:build linux && amd64

package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// BenchmarkFP16DecodeKernel: the one-row fp16 kernel over native B blocks
// against the CPU plugin's exact F16 matrix-vector product over the same
// bytes (N rows of K halves), in bytes per second of the thread's CPU time
// (steadier than the wall clock on a shared machine). 768×256 stays in
// cache; 2048×4096 (16 MB) does not.
func BenchmarkFP16DecodeKernel(b *testing.B) {
	if !haveKernels {
		b.Skip("no AVX-512 kernels")
	}
	for _, s := range [][2]int{{768, 256}, {2048, 4096}} {
		K, N := s[0], s[1]
		kBlocks, groups := K/32, N/16
		rng := rand.New(rand.NewPCG(1, 2))
		w := make([]byte, 2*K*N)
		for i := 0; i+1 < len(w); i += 2 {
			h := npu.F32ToF16(float32(rng.NormFloat64()))
			w[i], w[i+1] = byte(h), byte(h>>8)
		}
		a := make([]float32, K)
		for i := range a {
			a[i] = npu.F16ToF32(npu.F32ToF16(float32(rng.NormFloat64())))
		}
		c := make([]float32, N)
		run := func(name string, f func()) {
			b.Run(fmt.Sprintf("%s/%dx%d", name, K, N), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := threadCPU()
				for b.Loop() {
					f()
				}
				b.ReportMetric(float64(len(w))*float64(b.N)/float64(threadCPU()-t0), "cpuGB/s")
			})
		}
		run("sim", func() {
			for g := range groups {
				fp16Direct1AVX512(w[g*kBlocks*1024:(g+1)*kBlocks*1024], kBlocks, a, K, c[g*16:], N)
			}
		})
		k := ggml.Available()[0]
		run("cpu-"+k.Name(), func() { k.MatVec(ggml.F16, w, a, c) })
	}
}

// threadCPU is the calling thread's CPU time in ns (locked to its thread).
func threadCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return ru.Utime.Nano() + ru.Stime.Nano()
}
