// Package userfile opens the files a user names — specs, models, datasets,
// kernel lists, reference files, the runs compare and merge read — as
// regular files only, without blocking, and reads them within a size
// bound: a FIFO, a device, a directory or an endless file is an error
// naming the path, never a hang or an exhausted memory.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by the error for a path that is not a regular
// file (a named pipe, a device, a socket, a directory).
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading if it is a regular file. The open itself
// cannot block (a FIFO with no writer is opened non-blocking, then
// refused), and what is checked is the file opened, not a name that could
// change in between. Errors are *fs.PathError naming path.
func Open(path string) (*os.File, error) { return open(path) }

// notRegular is the error for a file of mode m.
func notRegular(path string, m fs.FileMode) error {
	kind := "special file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "named pipe"
	case m&fs.ModeCharDevice != 0:
		kind = "character device"
	case m&fs.ModeDevice != 0:
		kind = "block device"
	case m&fs.ModeSocket != 0:
		kind = "socket"
	case m.IsDir():
		kind = "directory"
	}
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (a %s)", ErrNotRegular, kind)}
}

// ErrTooLarge is wrapped by ReadFile's error for a file over its bound.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads a regular file of at most max bytes.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrTooLarge, st.Size(), max)}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > max { // grew while read
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than the %d bytes allowed", ErrTooLarge, max)}
	}
	return data, nil
}
