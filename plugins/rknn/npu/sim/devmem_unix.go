//go:build unix

package sim

import "golang.org/x/sys/unix"

// allocDevice maps a device buffer outside the Go heap, as the real
// runtime's DMA buffers are: hundreds of MB of converted weights on the
// heap would double the collector's target, and the process's peak RSS
// with it. The pages are zero and count only once touched.
func allocDevice(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

// freeDevice unmaps a buffer of allocDevice; nothing may touch it after.
func freeDevice(b []byte) { _ = unix.Munmap(b) }
