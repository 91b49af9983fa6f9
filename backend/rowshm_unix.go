//go:build unix

package backend

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapRows maps the plugin's end of the region f (its whole size).
func mapRows(f *os.File) (*rowRegion, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shared rows: %w", err)
	}
	size := st.Size()
	if size < rowsHeader || size > 1<<30 || int64(int(size)) != size {
		return nil, fmt.Errorf("shared rows: a region of %d bytes", size)
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("shared rows: not a regular file")
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shared rows: mmap: %w", err)
	}
	return &rowRegion{mem: mem, unmap: unix.Munmap}, nil
}
