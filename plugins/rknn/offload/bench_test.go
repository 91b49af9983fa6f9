package offload

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
)

// BenchmarkFFNUpLlama32_1B: Llama-3.2-1B's ffn_up (K=2048, N=8192) offloaded
// through the simulator. The GFLOPS are the simulation's speed on this host,
// not an RK3588's; npu-GFLOPS counts only the core runs, call-GFLOPS the
// whole call (activation conversion and gather included).
func BenchmarkFFNUpLlama32_1B(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	w := randWeight(rng, "blk.0.ffn_up.weight", 2048, 8192)
	for _, typ := range []Type{FP16, Int8} {
		for _, T := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/T=%d", typ, T), func(b *testing.B) {
				o, err := New(Config{Driver: sim.New(sim.Options{}), Type: typ, Cores: 3, ACLayout: npu.LayoutNative}, engine.NewCPUMatMul(engine.Exact, nil, nil))
				if err != nil {
					b.Fatal(err)
				}
				defer o.Close()
				op := &engine.MatMulOp{Name: "ffn_up-0", T: T, K: 2048, N: 8192, Weight: w}
				x := randVec(rng, T*2048)
				out := make([]float32, T*8192)
				if err := o.MatMul(op, x, out); err != nil { // warm-up: conversion, contexts
					b.Fatal(err)
				}
				before := o.Stats()
				b.ResetTimer()
				for b.Loop() {
					if err := o.MatMul(op, x, out); err != nil {
						b.Fatal(err)
					}
				}
				s := o.Stats()
				calls := float64(s.NPUCalls - before.NPUCalls)
				flop := 2 * float64(T) * 2048 * 8192
				b.ReportMetric(flop*calls/float64(s.RunNS-before.RunNS), "npu-GFLOPS")
				b.ReportMetric(flop/(float64(b.Elapsed().Nanoseconds())/float64(b.N)), "call-GFLOPS")
			})
		}
	}
}
