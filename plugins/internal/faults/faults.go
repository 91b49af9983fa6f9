// Package faults injects faults into a simulated device's runs, to prove
// that a pipeline catches them. It is the one fault option of every
// simulated device plugin (rknn with driver sim, hexagon), spelled in a
// spec as
//
//	options: {faults: {crash_after: N, hang_after: N, nan_after: N, inf_after: N, bitflip_after: N, bitflip_bit: B}}
//
// A count N leaves the first N device runs after Load alone and hits every
// run from N+1 on (0: from the first run of the first Eval); a missing
// count is off:
//
//	crash_after    the plugin process exits with status 70 (CrashExitCode),
//	               as a dying driver takes it: the host reports it crashed
//	hang_after     the run never returns, as on a wedged device: the host's
//	               eval timeout kills the plugin
//	nan_after      output element 0 becomes NaN (float outputs only)
//	inf_after      output element 0 becomes +Inf (float outputs only)
//	bitflip_after  bit bitflip_bit (0..31, default 0 = least significant)
//	               of output element 0 flips, for the accuracy gates to catch
//
// A device run is one call of the device: an NPU context's run (one core
// of a matmul), an HTP matmul. Runs are counted from Arm, which the plugin
// calls after Load's warm-up, so a count means the same whatever the
// warm-up ran.
package faults

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sync/atomic"

	"github.com/x448/float16"
)

// OptionName is the plugin option that holds Options.
const OptionName = "faults"

// CrashExitCode is the exit status of a simulated device crash.
const CrashExitCode = 70

// Options are the faults a spec asks for. Counts are pointers: 0 is a
// valid count, nil is off.
type Options struct {
	CrashAfter   *int `json:"crash_after"`
	HangAfter    *int `json:"hang_after"`
	NaNAfter     *int `json:"nan_after"`
	InfAfter     *int `json:"inf_after"`
	BitflipAfter *int `json:"bitflip_after"`
	BitflipBit   *int `json:"bitflip_bit"`
}

// counts lists the counts with their option names, in a fixed order.
func (o *Options) counts() []struct {
	name string
	n    *int
} {
	return []struct {
		name string
		n    *int
	}{{"crash_after", o.CrashAfter}, {"hang_after", o.HangAfter}, {"nan_after", o.NaNAfter},
		{"inf_after", o.InfAfter}, {"bitflip_after", o.BitflipAfter}}
}

// Any reports whether o asks for a fault (nil: no).
func (o *Options) Any() bool {
	if o == nil {
		return false
	}
	for _, c := range o.counts() {
		if c.n != nil {
			return true
		}
	}
	return false
}

// Validate checks the counts and the bit; errors name the option
// ("faults.nan_after"). nil is valid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	for _, c := range o.counts() {
		if c.n != nil && *c.n < 0 {
			return fmt.Errorf("option \"%s.%s\": %d must be >= 0", OptionName, c.name, *c.n)
		}
	}
	if b := o.BitflipBit; b != nil {
		if *b < 0 || *b > 31 {
			return fmt.Errorf("option \"%s.bitflip_bit\": %d outside 0..31", OptionName, *b)
		}
		if o.BitflipAfter == nil {
			return fmt.Errorf("option \"%s.bitflip_bit\" needs %s.bitflip_after", OptionName, OptionName)
		}
	}
	return nil
}

// Injector applies valid Options to a device's runs. A nil Injector
// injects nothing, so a device calls it whether or not faults were asked
// for.
type Injector struct {
	o     Options
	bit   int // the bit bitflip_after flips
	armed atomic.Bool
	runs  atomic.Int64 // runs since Arm
	crash func()       // ends the process; the package's tests record instead
	hang  func()       // never returns; the package's tests release it
}

// New returns the injector of o, nil if o asks for no fault. o must have
// passed Validate.
func New(o *Options) *Injector {
	if !o.Any() {
		return nil
	}
	in := &Injector{o: *o, crash: func() { os.Exit(CrashExitCode) }, hang: func() { select {} }}
	if o.BitflipBit != nil {
		in.bit = *o.BitflipBit
	}
	return in
}

// Arm starts counting runs: the plugin calls it once Load's warm-up ran.
func (in *Injector) Arm() {
	if in != nil {
		in.armed.Store(true)
	}
}

// Run is one device run in the fault schedule; the zero Run (before Arm,
// or without faults) is hit by none.
type Run struct {
	in *Injector
	n  int64 // 1 for the first run after Arm
}

// Begin counts a device run and applies the faults that strike before it
// computes: due to crash, the process exits; due to hang, Begin never
// returns. The run's output faults are applied by Run.Corrupt.
func (in *Injector) Begin() Run {
	if in == nil || !in.armed.Load() {
		return Run{}
	}
	r := Run{in: in, n: in.runs.Add(1)}
	if r.hit(in.o.CrashAfter) {
		in.crash()
	}
	if r.hit(in.o.HangAfter) {
		in.hang()
	}
	return r
}

func (r Run) hit(after *int) bool { return r.in != nil && after != nil && r.n > int64(*after) }

// Element is the format of a device output's elements, stored
// little-endian: Float are IEEE binary16 or binary32, the others
// two's-complement integers.
type Element struct {
	Bits  int
	Float bool
}

// Float32 is the element of a float32 output.
var Float32 = Element{Bits: 32, Float: true}

// CheckOutput refuses an output whose elements bitflip_bit lies outside;
// a device calls it when it creates an output, before any Corrupt.
func (in *Injector) CheckOutput(e Element) error {
	if in != nil && in.o.BitflipAfter != nil && in.bit >= e.Bits {
		return fmt.Errorf("option \"%s.bitflip_bit\": bit %d is outside the %d-bit output element", OptionName, in.bit, e.Bits)
	}
	return nil
}

// Corrupt applies the output faults due at r to element 0 of buf, whose
// elements are e: NaN or +Inf (float elements), then the flipped bit.
func (r Run) Corrupt(buf []byte, e Element) {
	if r.in == nil || len(buf) < e.Bits/8 {
		return
	}
	o := &r.in.o
	if e.Float {
		if r.hit(o.NaNAfter) {
			setFloat(buf, e, float32(math.NaN()))
		}
		if r.hit(o.InfAfter) {
			setFloat(buf, e, float32(math.Inf(1)))
		}
	}
	if r.hit(o.BitflipAfter) {
		buf[r.in.bit/8] ^= 1 << (r.in.bit % 8)
	}
}

// CorruptFloat32 is Corrupt for a float32 output.
func (r Run) CorruptFloat32(out []float32) {
	if r.in == nil || len(out) == 0 {
		return
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], math.Float32bits(out[0]))
	r.Corrupt(b[:], Float32)
	out[0] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
}

func setFloat(buf []byte, e Element, v float32) {
	if e.Bits == 32 {
		binary.LittleEndian.PutUint32(buf, math.Float32bits(v))
		return
	}
	binary.LittleEndian.PutUint16(buf, float16.Fromfloat32(v).Bits())
}
