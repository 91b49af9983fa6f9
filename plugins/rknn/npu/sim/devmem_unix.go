//go:build unix

package sim

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the usual hosts.
const hugePage = 2 << 20

// allocDevice maps a device buffer outside the Go heap, as the real
// runtime's DMA buffers are: hundreds of MB of converted weights on the
// heap would double the collector's target, and the process's peak RSS
// with it. The pages are zero and count only once touched. A buffer of a
// huge page or more starts on a huge-page boundary and asks for huge pages
// (on the board it is physically contiguous memory): the weights are then
// streamed without a TLB miss and a stop of the hardware prefetchers every
// 4 KB, and mapped with 512 times fewer page faults.
func allocDevice(size int) ([]byte, error) {
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_ANON | unix.MAP_PRIVATE
	if size < hugePage {
		p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), prot, flags)
		if err != nil {
			return nil, err
		}
		return unsafe.Slice((*byte)(p), size), nil
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size+hugePage), prot, flags)
	if err != nil {
		return nil, err
	}
	// Keep [head, head+size) of the mapping, head its first boundary.
	head := (hugePage - uintptr(p)%hugePage) % hugePage
	if head > 0 {
		_ = unix.MunmapPtr(p, head)
	}
	if tail := hugePage - head; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, head+uintptr(size)), tail)
	}
	buf := unsafe.Slice((*byte)(unsafe.Add(p, head)), size)
	askHugePages(buf)
	return buf, nil
}

// freeDevice unmaps a buffer of allocDevice; nothing may touch it after.
func freeDevice(b []byte) {
	if len(b) > 0 {
		_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
	}
}
