//go:build !unix

package gguf

import (
	"io"

	"github.com/evalrun/evalrun/internal/userfile"
)

// Open reads the whole file (no mmap on this platform) and parses it; a
// path that is not a regular file is refused, not read.
func Open(path string) (*File, error) {
	f, err := userfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// OpenCopy is Open: the file is read into memory on this platform anyway.
func OpenCopy(path string) (*File, error) { return Open(path) }

// Evict does nothing where files are read, not mapped.
func (f *File) Evict(data []byte) {}
