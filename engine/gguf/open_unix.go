//go:build unix

package gguf

import (
	"fmt"
	"math"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/evalrun/evalrun/internal/userfile"
)

// Open maps the file read-only and parses it. Close the File to unmap it.
func Open(path string) (*File, error) {
	fd, err := userfile.Open(path) // a FIFO or a device is refused, not opened for reading
	if err != nil {
		return nil, err
	}
	defer fd.Close() // the mapping outlives the descriptor
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size == 0 {
		return Parse(nil, path) // mmap refuses length 0; Parse reports the empty file
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%s: file of %d bytes is too large to map", path, size)
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	f, err := Parse(data, path)
	if err != nil {
		unix.Munmap(data)
		return nil, err
	}
	f.unmap = func() error { return unix.Munmap(data) }
	return f, nil
}

// Evict tells the OS that the pages of data, a view into the file's mapping
// (TensorData), are not needed now: they leave the process's resident set
// and are read again from the page cache if touched. A backend that copies
// weights to a device calls it so that memory holds one copy. Views of a
// file that is not mapped are left alone.
func (f *File) Evict(data []byte) {
	if f.unmap == nil || len(data) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&data[0]))
	end := start + uintptr(len(data))
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if lo >= hi {
		return
	}
	_ = unix.Madvise(data[lo-start:hi-start], unix.MADV_DONTNEED)
}
