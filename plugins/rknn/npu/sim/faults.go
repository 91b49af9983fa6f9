package sim

// Faults make the simulated device misbehave, to test how the host copes.
// A count N > 0 means runs 1..N of the driver (all its contexts) are normal
// and every run from N+1 on is affected; 0 disables the fault.
type Faults struct {
	// CrashAfterRuns calls Options.Exit(CrashExitCode) at run N+1.
	CrashAfterRuns int `mapstructure:"crash_after_runs"`
	// HangAfterRuns blocks run N+1 (and later ones) until Options.Hang is
	// closed, forever if it is nil.
	HangAfterRuns int `mapstructure:"hang_after_runs"`
	// NaNAfterRuns and InfAfterRuns write NaN / +Inf into C element (0,0)
	// of float outputs; integer outputs have no such value and are left alone.
	NaNAfterRuns int `mapstructure:"nan_after_runs"`
	InfAfterRuns int `mapstructure:"inf_after_runs"`
	// BitFlipAfterRuns flips bit BitFlipBit (0 = least significant) of C
	// element (0,0); the bit must lie inside the output element.
	BitFlipAfterRuns int `mapstructure:"bitflip_after_runs"`
	BitFlipBit       int `mapstructure:"bitflip_bit"`
}

// Any reports whether a fault is configured.
func (f Faults) Any() bool {
	return f.CrashAfterRuns > 0 || f.HangAfterRuns > 0 || f.NaNAfterRuns > 0 || f.InfAfterRuns > 0 || f.BitFlipAfterRuns > 0
}
