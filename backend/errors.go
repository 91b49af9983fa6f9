package backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error kinds a Backend returns (wrapped, test with errors.Is). They travel
// across the plugin boundary as gRPC status codes, so the host sees the same
// kind and the plugin's message text.
var (
	// ErrInvalidArgument: a bad option or request (gRPC InvalidArgument).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotLoaded: the call needs a model and none is loaded (FailedPrecondition).
	ErrNotLoaded = errors.New("no model loaded")
	// ErrUnsupported: the plugin does not implement the call (Unimplemented).
	ErrUnsupported = errors.New("not supported")
	// ErrCrashed: the plugin process died; the error text carries its exit
	// status and the last lines of its stderr. Host side only.
	ErrCrashed = errors.New("plugin crashed")
)

// Errorf returns an error of the given kind (one of the Err* above) whose
// text is exactly the formatted message.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

type kindError struct {
	kind error
	msg  string
	code codes.Code // set on errors rebuilt from a gRPC status
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// GRPCStatus lets status.Code(err) report the code an error came with.
func (e *kindError) GRPCStatus() *status.Status {
	code := e.code
	if code == codes.OK {
		code = codeOf(e)
	}
	return status.New(code, e.msg)
}

// codeOf maps an error from a Backend to the gRPC code it travels as.
func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, ErrInvalidArgument):
		return codes.InvalidArgument
	case errors.Is(err, ErrNotLoaded):
		return codes.FailedPrecondition
	case errors.Is(err, ErrUnsupported):
		return codes.Unimplemented
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, fs.ErrNotExist):
		return codes.NotFound
	case errors.Is(err, fs.ErrPermission):
		return codes.PermissionDenied
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unknown
}

// toStatus is used by the gRPC server: the plugin's message with its code.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(codeOf(err), err.Error())
}

// fromStatus is used by the gRPC client: it turns a status back into an error
// of the matching kind, keeping the plugin's message text.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		return err
	}
	var kind error
	switch s.Code() {
	case codes.InvalidArgument:
		kind = ErrInvalidArgument
	case codes.FailedPrecondition:
		kind = ErrNotLoaded
	case codes.Unimplemented:
		kind = ErrUnsupported
	case codes.DeadlineExceeded:
		kind = context.DeadlineExceeded
	case codes.Canceled:
		kind = context.Canceled
	case codes.NotFound:
		kind = fs.ErrNotExist
	case codes.PermissionDenied:
		kind = fs.ErrPermission
	default:
		return &kindError{kind: errUnclassified, msg: s.Message(), code: s.Code()}
	}
	return &kindError{kind: kind, msg: s.Message(), code: s.Code()}
}

// errUnclassified is the kind of remote errors without a matching local kind.
var errUnclassified = errors.New("backend error")
