//go:build unix

package offload

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
)

// BenchmarkDecode decodes single tokens (tg) and 32-token prompts (pp32,
// logits of the last) of the model EVALRUN_BENCH_MODEL (skipped without
// it) on 2 threads, on the CPU and through the simulated NPU (fp16 and
// int8, 3 cores) as the rknn plugin runs it: for profiling the simulator
// against the CPU (-cpuprofile). cpu-ms/op is the process's CPU time per
// call, steadier than the wall clock on a shared machine.
func BenchmarkDecode(b *testing.B) {
	path := os.Getenv("EVALRUN_BENCH_MODEL")
	if path == "" {
		b.Skip("EVALRUN_BENCH_MODEL not set")
	}
	for _, backend := range []string{"cpu", "fp16", "int8"} {
		b.Run(backend, func(b *testing.B) {
			var stats func() Stats // the offload's, where the NPU computes
			m, err := engine.Open(path, engine.Options{Threads: 2})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			if backend != "cpu" {
				typ := FP16
				if backend == "int8" {
					typ = Int8
				}
				cfg := Config{Driver: sim.New(sim.Options{Threads: m.Threads(), Parallel: m.Parallel}), Type: typ, Cores: 3,
					ACLayout: npu.LayoutNative}
				o, _, _, err := Attach(m, m.CPUMatMul(), cfg, "")
				if err != nil {
					b.Fatal(err)
				}
				defer o.Close()
				m.UseMatMul(o) // as the plugin attaches it (shared activations included)
				stats = o.Stats
			}
			s := m.NewSession(4096)
			emit := func(int, []float32) error { return nil }
			for _, T := range []int{1, 32, 128} {
				tokens := make([]int32, T)
				for i := range tokens {
					tokens[i] = int32(1 + i)
				}
				last := func(i int) bool { return i == T-1 }
				name := "tg"
				if T > 1 {
					name = fmt.Sprintf("pp%d", T)
				}
				b.Run(name, func(b *testing.B) {
					for range 2 { // warm-up
						if err := s.Decode(tokens, last, emit); err != nil {
							b.Fatal(err)
						}
					}
					t0 := processCPU()
					var s0 Stats
					if stats != nil {
						s0 = stats()
					}
					for b.Loop() {
						if T > 1 || s.Pos() >= 4000 {
							s.Reset()
						}
						if err := s.Decode(tokens, last, emit); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(processCPU()-t0)/float64(b.N)/1e6, "cpu-ms/op")
					if stats != nil { // wall clock of the device calls' steps
						s := stats()
						perOp := func(ns int64) float64 { return float64(ns) / float64(b.N) / 1e6 }
						b.ReportMetric(perOp(s.ConvertNS-s0.ConvertNS), "convert-ms/op")
						b.ReportMetric(perOp(s.RunNS-s0.RunNS), "run-ms/op")
						b.ReportMetric(perOp(s.GatherNS-s0.GatherNS), "gather-ms/op")
					}
				})
			}
		})
	}
}

func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(0, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
