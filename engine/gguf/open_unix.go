//go:build unix

package gguf

import (
	"fmt"
	"io"
	"math"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/evalrun/evalrun/internal/userfile"
)

// Open maps the file read-only and parses it. Close the File to unmap it.
func Open(path string) (*File, error) {
	fd, size, err := openSized(path)
	if err != nil || size == 0 {
		return nil, err
	}
	defer fd.Close() // the mapping outlives the descriptor
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

// openSized opens path for reading and returns its size: a nil file and
// Parse's error for an empty file, which mmap refuses.
func openSized(path string) (*os.File, int64, error) {
	fd, err := userfile.Open(path) // a FIFO or a device is refused, not opened for reading
	if err != nil {
		return nil, 0, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, 0, err
	}
	size := st.Size()
	if size == 0 {
		fd.Close()
		_, err := Parse(nil, path) // reports the empty file
		return nil, 0, err
	}
	if size > math.MaxInt-hugePage {
		fd.Close()
		return nil, 0, fmt.Errorf("%s: file of %d bytes is too large to map", path, size)
	}
	return fd, size, nil
}

// hugePage is the size of a transparent huge page on amd64 and arm64 (4K
// base pages).
const hugePage = 2 << 20

// OpenCopy reads the file into memory of the process's own, backed by
// transparent huge pages where the OS offers them, and parses it: weights
// streamed from 2 MiB pages cost a page walk per 2 MiB instead of per 4 KiB
// (measured: single-thread decode of a 768-wide F32 model 16 % faster than
// from the mapped file, docs/performance.md). It costs a copy at load and
// memory of its own (the file's page cache is not shared with other
// processes' mappings). Close the File to free it; Evict leaves it alone.
func OpenCopy(path string) (*File, error) {
	fd, size, err := openSized(path)
	if err != nil || size == 0 {
		return nil, err
	}
	defer fd.Close()
	n := (int(size) + hugePage - 1) / hugePage * hugePage
	// One huge page more, to start at a 2 MiB boundary: only aligned
	// ranges become huge pages.
	raw, err := unix.Mmap(-1, 0, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("%s: memory for a copy of %d bytes: %w", path, size, err)
	}
	off := int(-uintptr(unsafe.Pointer(&raw[0])) & (hugePage - 1))
	data := raw[off : off+int(size)]
	adviseHugePages(raw[off : off+n])
	if _, err := io.ReadFull(io.NewSectionReader(fd, 0, size), data); err != nil {
		unix.Munmap(raw)
		return nil, fmt.Errorf("%s: read: %w", path, err)
	}
	_ = unix.Mprotect(raw, unix.PROT_READ) // weights are read-only, as when mapped
	f, err := Parse(data, path)
	if err != nil {
		unix.Munmap(raw)
		return nil, err
	}
	f.unmap = func() error { return unix.Munmap(raw) }
	f.copied = true
	return f, nil
}

// Evict tells the OS that the pages of data, a view into the file's mapping
// (TensorData), are not needed now: they leave the process's resident set
// and are read again from the page cache if touched. A backend that copies
// weights to a device calls it so that memory holds one copy. Views of a
// file that is not mapped are left alone, and so are those of a copy
// (OpenCopy): the OS would discard its pages, not read them again.
func (f *File) Evict(data []byte) {
	if f.unmap == nil || f.copied || len(data) == 0 {
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
