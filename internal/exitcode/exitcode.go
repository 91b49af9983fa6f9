// Package exitcode holds the exit codes of evalrun and of the plugin
// commands it runs on a user's behalf (evalrun kernels and ops are the rknn
// plugin's), and the error that marks bad input. It is the CLI's concern,
// not the plugin contract's: a plugin serving backend.Backend never exits
// with these. One table, docs' "Exit codes".
package exitcode

import "fmt"

const (
	Pass       = 0 // every backend ran and passed its gates
	GateFailed = 1 // a gate failed (accuracy or speed below its limit)
	BadInput   = 2 // bad input or usage: spec, dataset, model, kernel list, flags, plugin options
	Backend    = 3 // a backend could not run (start, load, crash, timeout) or the run was interrupted
)

// InputError marks a problem with the user's input (spec, dataset, model
// file, plugin options, results directory, shards to merge): exit BadInput.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Input is an *InputError with a formatted message.
func Input(format string, args ...any) error {
	return &InputError{fmt.Errorf(format, args...)}
}
