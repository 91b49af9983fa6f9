package sim

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// onesSetup binds A = B = 1 (fp16) so every C element is K.
func onesSetup(t *testing.T, d npu.Driver, typ npu.MatmulType) *bound {
	t.Helper()
	in := mkInfo(typ, 2, 32, 16, npu.LayoutNative, npu.LayoutNative)
	bd := setup(t, d, in)
	ones := make([]float32, 32*16)
	for i := range ones {
		ones[i] = 1
	}
	if err := npu.PackA(in, ones[:2*32], 2, 32, bd.a.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := npu.PackB(in, ones, 32, 16, bd.b.Bytes()); err != nil {
		t.Fatal(err)
	}
	return bd
}

func cValues(t *testing.T, bd *bound, typ npu.MatmulType) []float32 {
	t.Helper()
	in := mkInfo(typ, 2, 32, 16, npu.LayoutNative, npu.LayoutNative)
	c := make([]float32, 2*16)
	if err := npu.UnpackC(in, bd.c.Bytes(), c, 2, 16); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCrashAfterRuns(t *testing.T) {
	var exits []int
	d := New(Options{Faults: Faults{CrashAfterRuns: 2}, Exit: func(code int) { exits = append(exits, code) }})
	bd := onesSetup(t, d, npu.Float16MMFloat16ToFloat32)
	for i := 0; i < 2; i++ {
		if err := bd.ctx.Run(); err != nil {
			t.Fatal(err)
		}
	}
	if len(exits) != 0 {
		t.Fatalf("crashed early: %v", exits)
	}
	// The run counter is per driver: a second context crashes too.
	other := onesSetup(t, d, npu.Float16MMFloat16ToFloat32)
	wantCode(t, "run 3", other.ctx.Run(), npu.ErrDeviceUnavailable, "crash at run 3")
	if len(exits) != 1 || exits[0] != CrashExitCode || CrashExitCode != 70 {
		t.Errorf("exit calls %v, want [70]", exits)
	}
	if d.Stats().Runs != 2 {
		t.Errorf("runs %d, want 2", d.Stats().Runs)
	}
}

func TestHangAfterRuns(t *testing.T) {
	release := make(chan struct{})
	d := New(Options{Faults: Faults{HangAfterRuns: 1}, Hang: release})
	bd := onesSetup(t, d, npu.Float16MMFloat16ToFloat32)
	if err := bd.ctx.Run(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- bd.ctx.Run() }()
	select {
	case err := <-done:
		t.Fatalf("run 2 returned %v instead of hanging", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		wantCode(t, "released hang", err, npu.ErrTimeout, "hang at run 2")
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after release")
	}
}

func TestNaNAndInfAfterRuns(t *testing.T) {
	for _, typ := range []npu.MatmulType{npu.Float16MMFloat16ToFloat32, npu.Float16MMFloat16ToFloat16} {
		for _, inf := range []bool{false, true} {
			f := Faults{NaNAfterRuns: 1}
			if inf {
				f = Faults{InfAfterRuns: 1}
			}
			d := New(Options{Faults: f})
			bd := onesSetup(t, d, typ)
			for run := 1; run <= 3; run++ {
				if err := bd.ctx.Run(); err != nil {
					t.Fatal(err)
				}
				c := cValues(t, bd, typ)
				first := float64(c[0])
				switch {
				case run == 1 && first != 32:
					t.Errorf("%s run 1: C[0] = %v, want 32", typ, first)
				case run > 1 && !inf && !math.IsNaN(first):
					t.Errorf("%s run %d: C[0] = %v, want NaN", typ, run, first)
				case run > 1 && inf && !math.IsInf(first, 1):
					t.Errorf("%s run %d: C[0] = %v, want +Inf", typ, run, first)
				}
				for i, v := range c[1:] {
					if v != 32 {
						t.Fatalf("%s run %d: C[%d] = %v, only element 0 is faulty", typ, run, i+1, v)
					}
				}
			}
		}
	}
	// Integer outputs have no NaN: left intact.
	d := New(Options{Faults: Faults{NaNAfterRuns: 1, InfAfterRuns: 1}})
	bd := setup(t, d, mkInfo(npu.Int8MMInt8ToInt32, 1, 32, 32, 0, 0))
	for i := range bd.a.Bytes() {
		bd.a.Bytes()[i] = 1
	}
	for i := range bd.b.Bytes() {
		bd.b.Bytes()[i] = 2
	}
	for run := 0; run < 2; run++ {
		if err := bd.ctx.Run(); err != nil {
			t.Fatal(err)
		}
	}
	if v := int32(binary.LittleEndian.Uint32(bd.c.Bytes())); v != 64 {
		t.Errorf("int32 C[0] = %d, want 64", v)
	}
}

func TestBitFlipAfterRuns(t *testing.T) {
	// fp32 out, bit 31: the sign of C[0] flips from run 2 on.
	d := New(Options{Faults: Faults{BitFlipAfterRuns: 1, BitFlipBit: 31}})
	bd := onesSetup(t, d, npu.Float16MMFloat16ToFloat32)
	for run, want := range []float32{32, -32, -32} {
		if err := bd.ctx.Run(); err != nil {
			t.Fatal(err)
		}
		if c := cValues(t, bd, npu.Float16MMFloat16ToFloat32); c[0] != want || c[1] != 32 {
			t.Errorf("run %d: C[0], C[1] = %v, %v; want %v, 32", run+1, c[0], c[1], want)
		}
	}
	// int16 out (int4 type), bit 3: 32 -> 40.
	d = New(Options{Faults: Faults{BitFlipAfterRuns: 1, BitFlipBit: 3}})
	in := mkInfo(npu.Int4MMInt4ToInt16, 1, 32, 64, 0, 0)
	ib := setup(t, d, in)
	for i := range ib.a.Bytes() {
		ib.a.Bytes()[i] = 0x11 // every int4 element = 1
	}
	for i := range ib.b.Bytes() {
		ib.b.Bytes()[i] = 0x11
	}
	for run, want := range []int16{32, 40} {
		if err := ib.ctx.Run(); err != nil {
			t.Fatal(err)
		}
		if v := int16(binary.LittleEndian.Uint16(ib.c.Bytes())); v != want {
			t.Errorf("int16 run %d: C[0] = %d, want %d", run+1, v, want)
		}
	}
	// A bit outside the 16-bit element is refused at create.
	d = New(Options{Faults: Faults{BitFlipAfterRuns: 1, BitFlipBit: 20}})
	_, _, err := d.Create(in)
	wantCode(t, "bit 20 of int16", err, npu.ErrParamInvalid, "bitflip_bit=20")
}

func TestParseFaults(t *testing.T) {
	f, err := ParseFaults(map[string]any{
		"crash_after_runs": 3, "hang-after-runs": int64(4), "nanafterruns": uint8(5),
		"InfAfterRuns": 6.0, "bitflip_after_runs": int32(7), "bitflip_bit": 31,
	})
	want := Faults{CrashAfterRuns: 3, HangAfterRuns: 4, NaNAfterRuns: 5, InfAfterRuns: 6, BitFlipAfterRuns: 7, BitFlipBit: 31}
	if err != nil || f != want || !f.Any() {
		t.Errorf("got %+v, %v; want %+v", f, err, want)
	}
	if f, err := ParseFaults(nil); err != nil || f.Any() {
		t.Errorf("empty: %+v %v", f, err)
	}
	bad := []struct {
		opts map[string]any
		msg  string
	}{
		{map[string]any{"crash_after": 1}, `unknown key "crash_after"`},
		{map[string]any{"crash_after_runs": "3"}, "crash_after_runs: want an integer, got string"},
		{map[string]any{"nan_after_runs": 1.5}, "nan_after_runs: 1.5 is not an integer"},
		{map[string]any{"hang_after_runs": -1}, "hang_after_runs: -1 must be >= 0"},
		{map[string]any{"bitflip_bit": 32}, "bitflip_bit: 32 outside 0..31"},
		{map[string]any{"inf_after_runs": true}, "inf_after_runs: want an integer, got bool"},
		{map[string]any{"inf_after_runs": uint64(1) << 40}, "out of range"},
	}
	for _, b := range bad {
		_, err := ParseFaults(b.opts)
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%v: error %v, want %q", b.opts, err, b.msg)
		}
	}
}
