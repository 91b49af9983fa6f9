package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sync/atomic"

	"github.com/x448/float16"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
	"github.com/evalrun/evalrun/plugins/rknn/npu/sim"
)

// faults are the fault_*_after options: nil is off, N leaves the first N NPU
// runs after Load alone and hits every run from N+1 on.
type faults struct {
	crash, hang, nan, inf, bitflip *int
	bit                            int // the bit bitflip flips, 0 = least significant
}

// after lists the counts with their option names, in a fixed order.
func (f faults) after() []struct {
	name string
	v    *int
} {
	return []struct {
		name string
		v    *int
	}{{"fault_crash_after", f.crash}, {"fault_hang_after", f.hang}, {"fault_nan_after", f.nan},
		{"fault_inf_after", f.inf}, {"fault_bitflip_after", f.bitflip}}
}

func (f faults) any() bool {
	for _, a := range f.after() {
		if a.v != nil {
			return true
		}
	}
	return false
}

// faultDriver wraps the NPU driver with the faults. Runs are counted from
// arm, which the plugin calls after Load's warm-up, so the counts mean the
// same whatever the warm-up ran (nothing at all when no op is offloaded at
// T=1).
type faultDriver struct {
	npu.Driver
	f     faults
	armed atomic.Bool
	runs  atomic.Int64 // runs since arm
	exit  func(code int)
}

func newFaultDriver(d npu.Driver, f faults) *faultDriver {
	return &faultDriver{Driver: d, f: f, exit: os.Exit}
}

func (d *faultDriver) arm() { d.armed.Store(true) }

func (d *faultDriver) Create(info *npu.MatmulInfo) (npu.Context, npu.IOAttr, error) {
	ctx, attrs, err := d.Driver.Create(info)
	if err != nil {
		return nil, attrs, err
	}
	if bits := attrs.C.Type.Bits(); d.f.bitflip != nil && d.f.bit >= bits {
		ctx.Destroy()
		return nil, attrs, fmt.Errorf("fault_bitflip_bit %d is outside the %d-bit %s output element", d.f.bit, bits, attrs.C.Type)
	}
	return &faultContext{Context: ctx, d: d, cType: attrs.C.Type}, attrs, nil
}

type faultContext struct {
	npu.Context
	d     *faultDriver
	cType npu.TensorType
	c     npu.Mem
}

func (c *faultContext) SetIOMem(m npu.Mem, attr *npu.TensorAttr) error {
	if attr.Name == "C" {
		c.c = m
	}
	return c.Context.SetIOMem(m, attr)
}

// Run is the device's run with the faults due at this run applied: a crash
// (the process exits as a dying driver would take it), a hang, or NaN, +Inf
// or a flipped bit in C element (0,0).
func (c *faultContext) Run() error {
	d := c.d
	if !d.armed.Load() {
		return c.Context.Run()
	}
	run := d.runs.Add(1)
	hit := func(after *int) bool { return after != nil && run > int64(*after) }
	if hit(d.f.crash) {
		d.exit(sim.CrashExitCode)
	}
	if hit(d.f.hang) {
		select {} // a wedged device never answers
	}
	if err := c.Context.Run(); err != nil || c.c == nil {
		return err
	}
	buf := c.c.Bytes()
	if c.cType.IsFloat() {
		if hit(d.f.nan) {
			setFirstFloat(buf, c.cType, float32(math.NaN()))
		}
		if hit(d.f.inf) {
			setFirstFloat(buf, c.cType, float32(math.Inf(1)))
		}
	}
	if hit(d.f.bitflip) {
		buf[d.f.bit/8] ^= 1 << (d.f.bit % 8) // little-endian element 0
	}
	return nil
}

func setFirstFloat(buf []byte, t npu.TensorType, v float32) {
	if t.Bits() == 32 {
		binary.LittleEndian.PutUint32(buf, math.Float32bits(v))
		return
	}
	binary.LittleEndian.PutUint16(buf, float16.Fromfloat32(v).Bits())
}
