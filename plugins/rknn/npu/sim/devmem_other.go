//go:build !unix

package sim

// allocDevice: where mmap is not available, device buffers live on the heap.
func allocDevice(size int) ([]byte, error) { return make([]byte, size), nil }

func freeDevice([]byte) {}
