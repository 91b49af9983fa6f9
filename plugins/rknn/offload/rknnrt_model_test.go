//go:build rknpu && cgo

package offload

import (
	"math"
	"os"
	"testing"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/rknnrt"
)

// TestWholeModelRknnrtEqualsSim runs stories260K with every matmul offloaded
// through the cgo driver (linked against the fake librknnrt by
// run-fake-test.sh) and through the simulator: the logits must be equal bit
// for bit, for every NPU type and both A/C layouts. On a board, with the real
// librknnrt, it reports the differences instead of failing on them.
func TestWholeModelRknnrtEqualsSim(t *testing.T) {
	fake := os.Getenv("EVALRUN_RKNNRT_FAKE") != ""
	for _, typ := range []Type{FP16, Int8, Int4} {
		for _, layout := range []npu.Layout{npu.LayoutNative, npu.LayoutNorm} {
			hw, err := rknnrt.New()
			if err != nil {
				t.Fatal(err)
			}
			mSim, _, _, _ := openOffloaded(t, modelF32, &Config{Type: typ, Cores: 3, ACLayout: layout})
			mHW, _, _, _ := openOffloaded(t, modelF32, &Config{Driver: hw, Type: typ, Cores: 3, ACLayout: layout})
			ids := promptTokens(t, mSim)
			a, b := decodeAll(t, mSim, ids), decodeAll(t, mHW, ids)
			diffs, maxAbs := 0, 0.0
			for i := range a {
				for j := range a[i] {
					if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
						diffs++
						maxAbs = math.Max(maxAbs, math.Abs(float64(a[i][j]-b[i][j])))
					}
				}
			}
			t.Logf("%v layout %d: %d rows, %d logits differ (max |Δ| %.3g)", typ, layout, len(a), diffs, maxAbs)
			if diffs > 0 && fake {
				t.Errorf("%v layout %d: rknnrt+fake differs from the sim in %d logits", typ, layout, diffs)
			}
		}
	}
}
