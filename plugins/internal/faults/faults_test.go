package faults

import (
	"encoding/binary"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/x448/float16"

	"github.com/evalrun/evalrun/plugins/internal/optdecode"
)

func ptr(v int) *int { return &v }

// TestValidate: the spec's mistakes are refused naming the option.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{NaNAfter: ptr(-1)}, `option "faults.nan_after": -1 must be >= 0`},
		{Options{CrashAfter: ptr(-2)}, `option "faults.crash_after": -2 must be >= 0`},
		{Options{BitflipAfter: ptr(0), BitflipBit: ptr(32)}, `option "faults.bitflip_bit": 32 outside 0..31`},
		{Options{BitflipAfter: ptr(0), BitflipBit: ptr(-1)}, `option "faults.bitflip_bit": -1 outside 0..31`},
		{Options{BitflipBit: ptr(0)}, `option "faults.bitflip_bit" needs faults.bitflip_after`},
	} {
		if err := c.o.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	var none *Options
	if err := none.Validate(); err != nil || none.Any() || New(none) != nil || New(&Options{}) != nil {
		t.Error("no faults must be valid and inject nothing")
	}
}

// TestSpecSpelling: the spec's object decodes into Options, and a key of
// another spelling is refused listing the valid ones.
func TestSpecSpelling(t *testing.T) {
	var opts struct {
		Faults *Options `json:"faults"`
	}
	err := optdecode.Decode(map[string]any{OptionName: map[string]any{"crash_after": 1.0, "hang_after": 2.0,
		"nan_after": 3.0, "inf_after": 4.0, "bitflip_after": 5.0, "bitflip_bit": 6.0}}, &opts)
	o := opts.Faults
	if err != nil || *o.CrashAfter != 1 || *o.HangAfter != 2 || *o.NaNAfter != 3 || *o.InfAfter != 4 || *o.BitflipAfter != 5 || *o.BitflipBit != 6 {
		t.Fatalf("decoded %+v, %v", o, err)
	}
	err = optdecode.Decode(map[string]any{OptionName: map[string]any{"crash_after_runs": 1.0}}, &opts)
	if err == nil || !strings.Contains(err.Error(), `unknown option "faults.crash_after_runs" (valid options in "faults": bitflip_after, bitflip_bit, crash_after, hang_after, inf_after, nan_after)`) {
		t.Errorf("old spelling: %v", err)
	}
}

// testInjector is New with the crash and the hang recorded.
func testInjector(o Options) (in *Injector, crashes *int, hangs chan struct{}) {
	in = New(&o)
	crashes, hangs = new(int), make(chan struct{})
	in.crash = func() { *crashes++ }
	in.hang = func() { <-hangs }
	return in, crashes, hangs
}

// TestCountsStartAtArm: runs before Arm (the warm-up) are not counted; a
// count N leaves N runs alone and crashes every later one.
func TestCountsStartAtArm(t *testing.T) {
	in, crashes, _ := testInjector(Options{CrashAfter: ptr(2)})
	for range 5 {
		if r := in.Begin(); r != (Run{}) {
			t.Fatal("a run before Arm was counted")
		}
	}
	in.Arm()
	for run, want := range []int{0, 0, 1, 2} {
		in.Begin()
		if *crashes != want {
			t.Fatalf("run %d after Arm: %d crashes, want %d", run+1, *crashes, want)
		}
	}
	var none *Injector
	none.Arm()
	if none.Begin() != (Run{}) || none.CheckOutput(Element{Bits: 8}) != nil {
		t.Error("a nil injector injected something")
	}
}

// TestHang: a run due to hang does not return (here: until released).
func TestHang(t *testing.T) {
	in, _, release := testInjector(Options{HangAfter: ptr(0)})
	in.Arm()
	done := make(chan struct{})
	go func() { in.Begin(); close(done) }()
	select {
	case <-done:
		t.Fatal("the first run returned despite hang_after 0")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
}

// TestRunsCountedOnceUnderConcurrency: concurrent runs each get their own
// number, so exactly the runs past N are hit.
func TestRunsCountedOnceUnderConcurrency(t *testing.T) {
	in := New(&Options{NaNAfter: ptr(30)})
	in.Arm()
	outs := make([][]float32, 100)
	var wg sync.WaitGroup
	for i := range outs {
		outs[i] = []float32{1}
		wg.Go(func() { in.Begin().CorruptFloat32(outs[i]) })
	}
	wg.Wait()
	nans := 0
	for _, o := range outs {
		if math.IsNaN(float64(o[0])) {
			nans++
		}
	}
	if nans != 70 {
		t.Errorf("%d of 100 runs hit by nan_after 30, want 70", nans)
	}
}

// TestCorrupt: NaN and +Inf land in element 0 of float outputs of either
// width, integer outputs keep theirs; the bit flips in any element type.
func TestCorrupt(t *testing.T) {
	fp16 := Element{Bits: 16, Float: true}
	first16 := func(b []byte) float64 { return float64(float16.Frombits(binary.LittleEndian.Uint16(b)).Float32()) }
	first32 := func(b []byte) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))) }
	for _, c := range []struct {
		o     Options
		e     Element
		first func([]byte) float64
		check func(float64) bool
	}{
		{Options{NaNAfter: ptr(0)}, Float32, first32, func(v float64) bool { return math.IsNaN(v) }},
		{Options{NaNAfter: ptr(0)}, fp16, first16, func(v float64) bool { return math.IsNaN(v) }},
		{Options{InfAfter: ptr(0)}, Float32, first32, func(v float64) bool { return math.IsInf(v, 1) }},
		{Options{InfAfter: ptr(0)}, fp16, first16, func(v float64) bool { return math.IsInf(v, 1) }},
		{Options{BitflipAfter: ptr(0), BitflipBit: ptr(31)}, Float32, first32, func(v float64) bool { return v == -2 }},
	} {
		in := New(&c.o)
		in.Arm()
		buf := make([]byte, 2*c.e.Bits/8)
		if c.e.Bits == 32 {
			binary.LittleEndian.PutUint32(buf, math.Float32bits(2))
			binary.LittleEndian.PutUint32(buf[4:], math.Float32bits(2))
		} else {
			binary.LittleEndian.PutUint16(buf, float16.Fromfloat32(2).Bits())
			binary.LittleEndian.PutUint16(buf[2:], float16.Fromfloat32(2).Bits())
		}
		in.Begin().Corrupt(buf, c.e)
		if v := c.first(buf); !c.check(v) {
			t.Errorf("%+v on %d-bit floats: element 0 = %v", c.o, c.e.Bits, v)
		}
		if v := c.first(buf[c.e.Bits/8:]); v != 2 {
			t.Errorf("%+v: element 1 = %v, only element 0 is hit", c.o, v)
		}
	}
	// Integers have no NaN or Inf; a flipped bit 3 of int16 32 is 40.
	in := New(&Options{NaNAfter: ptr(0), InfAfter: ptr(0), BitflipAfter: ptr(0), BitflipBit: ptr(3)})
	in.Arm()
	buf := binary.LittleEndian.AppendUint16(nil, 32)
	in.Begin().Corrupt(buf, Element{Bits: 16})
	if v := int16(binary.LittleEndian.Uint16(buf)); v != 40 {
		t.Errorf("int16 32 with bit 3 flipped and no NaN: %d, want 40", v)
	}
	in = New(&Options{BitflipAfter: ptr(0), BitflipBit: ptr(31)})
	in.Arm()
	out := []float32{1, 1}
	in.Begin().CorruptFloat32(out)
	if out[0] != -1 || out[1] != 1 {
		t.Errorf("float32 output %v with the sign bit of element 0 flipped, want [-1 1]", out)
	}
}

// TestCheckOutput: a bit outside the device's output element is refused
// when the output is created, naming the option.
func TestCheckOutput(t *testing.T) {
	in := New(&Options{BitflipAfter: ptr(0), BitflipBit: ptr(20)})
	if err := in.CheckOutput(Float32); err != nil {
		t.Errorf("bit 20 of float32: %v", err)
	}
	err := in.CheckOutput(Element{Bits: 16})
	if err == nil || err.Error() != `option "faults.bitflip_bit": bit 20 is outside the 16-bit output element` {
		t.Errorf("bit 20 of int16: %v", err)
	}
	if err := New(&Options{NaNAfter: ptr(0)}).CheckOutput(Element{Bits: 8}); err != nil {
		t.Errorf("no bitflip: %v", err)
	}
}
