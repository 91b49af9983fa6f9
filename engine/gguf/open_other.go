//go:build !unix

package gguf

import "os"

// Open reads the whole file (no mmap on this platform) and parses it.
func Open(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Evict does nothing where files are read, not mapped.
func (f *File) Evict(data []byte) {}
