package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// BenchmarkRun measures a simulated fp16 matmul (decode + multiply + encode)
// and reports GFLOPS = 2·M·K·N / time.
func BenchmarkRun(b *testing.B) {
	for _, s := range [][3]int32{{1, 2048, 8192}, {128, 2048, 2048}} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%dx%dx%d/threads=%d", s[0], s[1], s[2], threads), func(b *testing.B) {
				in := mkInfo(npu.Float16MMFloat16ToFloat32, s[0], s[1], s[2], npu.LayoutNative, npu.LayoutNative)
				d := New(Options{Threads: threads})
				bd := setup(b, d, in)
				rng := rand.New(rand.NewPCG(1, 1))
				for _, m := range []npu.Mem{bd.a, bd.b} {
					buf := m.Bytes()
					for i := 0; i+1 < len(buf); i += 2 {
						h := npu.F32ToF16(float32(rng.NormFloat64()))
						buf[i], buf[i+1] = byte(h), byte(h>>8)
					}
				}
				for b.Loop() {
					if err := bd.ctx.Run(); err != nil {
						b.Fatal(err)
					}
				}
				flops := 2 * float64(s[0]) * float64(s[1]) * float64(s[2]) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOPS")
			})
		}
	}
}
