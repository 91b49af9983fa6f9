package htp

import (
	"fmt"
	"math"
	"os"
	"sync/atomic"
)

// CrashExitCode is the exit status of a simulated device crash (the process
// dies as a dying FastRPC session would take it).
const CrashExitCode = 70

// Faults are injected into the HTP's matmuls, counted from Arm (after the
// plugin's warm-up): a fault with After = N leaves the first N matmuls alone
// and hits every one from N+1 on. nil fields are off. The json names are
// the plugin's option "faults".
type Faults struct {
	CrashAfter   *int `json:"crash_after"`
	HangAfter    *int `json:"hang_after"`
	NaNAfter     *int `json:"nan_after"`
	InfAfter     *int `json:"inf_after"`
	BitflipAfter *int `json:"bitflip_after"`
	Bit          int  `json:"bitflip_bit"` // the bit BitflipAfter flips in output element 0

	armed atomic.Bool
	runs  atomic.Int64
	run   atomic.Int64 // the current run's number, for after
	exit  func(int)
}

// Check validates the counts and the bit; errors name the field.
func (f *Faults) Check() error {
	for name, v := range map[string]*int{"crash_after": f.CrashAfter, "hang_after": f.HangAfter,
		"nan_after": f.NaNAfter, "inf_after": f.InfAfter, "bitflip_after": f.BitflipAfter} {
		if v != nil && *v < 0 {
			return fmt.Errorf("%s: %d must be >= 0", name, *v)
		}
	}
	if f.Bit < 0 || f.Bit > 31 {
		return fmt.Errorf("bitflip_bit: %d outside 0..31", f.Bit)
	}
	if f.Bit != 0 && f.BitflipAfter == nil {
		return fmt.Errorf("bitflip_bit needs bitflip_after")
	}
	return nil
}

// Arm starts counting.
func (f *Faults) Arm() {
	if f != nil {
		f.armed.Store(true)
	}
}

func hit(after *int, run int64) bool { return after != nil && run > int64(*after) }

// before counts the run and applies the faults that stop it.
func (f *Faults) before() error {
	if f == nil || !f.armed.Load() {
		return nil
	}
	run := f.runs.Add(1)
	f.run.Store(run)
	if hit(f.CrashAfter, run) {
		exit := f.exit
		if exit == nil {
			exit = os.Exit
		}
		exit(CrashExitCode)
	}
	if hit(f.HangAfter, run) {
		select {} // a wedged session never answers
	}
	return nil
}

// after corrupts the output of a run that is due: NaN or +Inf in element
// 0, or a flipped bit.
func (f *Faults) after(out []float32) {
	if f == nil || !f.armed.Load() || len(out) == 0 {
		return
	}
	run := f.run.Load()
	if hit(f.NaNAfter, run) {
		setFirst(out, float32(math.NaN()))
	}
	if hit(f.InfAfter, run) {
		setFirst(out, float32(math.Inf(1)))
	}
	if hit(f.BitflipAfter, run) {
		flipBit(out, f.Bit)
	}
}
