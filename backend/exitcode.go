package backend

import "fmt"

// Exit codes of evalrun and of the plugin commands it runs on a user's
// behalf (evalrun kernels and ops are the rknn plugin's): one table, the
// README's "Exit codes".
const (
	ExitPass       = 0 // every backend ran and passed its gates
	ExitGateFailed = 1 // a gate failed (accuracy or speed below its limit)
	ExitBadInput   = 2 // bad input or usage: spec, dataset, model, kernel list, flags, plugin options
	ExitBackend    = 3 // a backend could not run (start, load, crash, timeout) or the run was interrupted
)

// InputError marks a problem with the user's input (spec, dataset, model
// file, plugin options, results directory, shards to merge): ExitBadInput.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// BadInput is an *InputError with a formatted message.
func BadInput(format string, args ...any) error {
	return &InputError{fmt.Errorf(format, args...)}
}
