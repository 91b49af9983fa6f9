package backend

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// createRows creates the host's region: a memfd (no file anywhere, gone
// with the last process that maps it), sized and then sealed so that
// neither side can shrink or grow it under the other's mapping, mapped
// shared. The descriptor is close-on-exec: only the plugin whose
// ExtraFiles name it inherits it.
func createRows(size int) (*rowRegion, *os.File, error) {
	fd, err := unix.MemfdCreate("evalrun-rows", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, nil, fmt.Errorf("shared rows: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "evalrun-rows")
	fail := func(what string, err error) (*rowRegion, *os.File, error) {
		f.Close()
		return nil, nil, fmt.Errorf("shared rows: %s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return fail("sealing", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	return &rowRegion{mem: mem, unmap: unix.Munmap}, f, nil
}
