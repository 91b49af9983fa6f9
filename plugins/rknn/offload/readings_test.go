package offload

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/evalrun/evalrun/engine"
	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
)

// constWeight is an F32 weight of N rows of K copies of v.
func constWeight(name string, K, N int, v float32) *engine.Weight {
	data := make([]byte, 4*K*N)
	for i := range K * N {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return &engine.Weight{Name: name, Type: ggml.F32, K: K, N: N, Data: data}
}

// TestInt4Overflow: 1024 products of 7·7 sum to 50176, beyond int16: the
// default reading saturates at 32767, int4_overflow wrap gives 50176−65536.
func TestInt4Overflow(t *testing.T) {
	w := constWeight("w", 1024, 64, 1)
	op := &engine.MatMulOp{Name: "ffn_up-0", T: 1, K: 1024, N: 64, Weight: w}
	x := make([]float32, 1024)
	for i := range x {
		x[i] = 1
	}
	sa := float32(1) / 7 // amax/7 for the activations and every weight row
	for _, c := range []struct {
		wrap bool
		want float32
	}{{false, 32767}, {true, 50176 - 65536}} {
		o := newOffload(t, Config{Type: Int4, ACLayout: npu.LayoutNative, Driver: sim.New(sim.Options{Int4Wrap: c.wrap})})
		out := run(t, o, op, x)
		if want := c.want * sa * sa; out[0] != want || out[63] != want {
			t.Errorf("wrap=%v: out %v, want %v", c.wrap, out[0], want)
		}
	}
}

// TestFP16Accumulation: 10000 then 31 × fp16(0.001) in one block of 32:
// fp32 accumulation rounds at every step, the ideal reading once.
func TestFP16Accumulation(t *testing.T) {
	w := constWeight("w", 32, 16, 1)
	op := &engine.MatMulOp{Name: "ffn_up-0", T: 1, K: 32, N: 16, Weight: w}
	x := make([]float32, 32)
	x[0] = 10000
	small := npu.F16ToF32(npu.F32ToF16(0.001))
	var ideal float64 = 10000
	var blocks float32 = 10000
	for i := 1; i < 32; i++ {
		x[i] = small
		ideal += float64(small)
		blocks += small
	}
	got := map[bool]float32{}
	for _, idealMode := range []bool{false, true} {
		o := newOffload(t, Config{Type: FP16, ACLayout: npu.LayoutNative, Driver: sim.New(sim.Options{FP16Ideal: idealMode})})
		got[idealMode] = run(t, o, op, x)[5]
	}
	if got[true] != float32(ideal) || got[false] != blocks || got[true] == got[false] {
		t.Errorf("ideal %v (want %v), blocks of 32 %v (want %v)", got[true], float32(ideal), got[false], blocks)
	}
}

// TestInt4BNibbleOrder: the offload writing B high nibble first and the
// device reading it so agree bit for bit with the default pair; either
// side alone flipped computes garbage.
func TestInt4BNibbleOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	w := randWeight(rng, "w", 128, 128)
	op := &engine.MatMulOp{Name: "ffn_up-0", T: 3, K: 128, N: 128, Weight: w}
	x := randVec(rng, 3*128)
	out := func(offloadHigh, deviceHigh bool) []float32 {
		o := newOffload(t, Config{Type: Int4, ACLayout: npu.LayoutNative, Int4BHighFirst: offloadHigh, Driver: sim.New(sim.Options{Int4BHighFirst: deviceHigh})})
		return run(t, o, op, x)
	}
	ref := out(false, false)
	if !slices.Equal(out(true, true), ref) {
		t.Error("high-first on both sides differs from low-first on both")
	}
	if e := nmse(out(true, false), ref); e < 0.1 {
		t.Errorf("a flipped B read the default way: NMSE %g, want garbage", e)
	}
}
