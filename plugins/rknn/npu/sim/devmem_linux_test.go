package sim

import (
	"bufio"
	"fmt"
	"os"
	"testing"
	"unsafe"
)

// mappingAt returns the end of the /proc/self/maps entry starting at addr.
func mappingAt(t *testing.T, addr uintptr) (end uintptr, ok bool) {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); err == nil && lo == addr {
			return hi, true
		}
	}
	return 0, false
}

// A large device buffer starts on a huge-page boundary and its mapping is
// exactly the buffer (the over-mapping used to align it is given back);
// freeing unmaps it.
func TestDeviceBufferAlignedAndExact(t *testing.T) {
	const size = 3<<20 + 4096
	b, err := allocDevice(size)
	if err != nil {
		t.Fatal(err)
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if len(b) != size || p%hugePage != 0 {
		t.Fatalf("buffer at %#x, %d bytes: want %d bytes on a %d boundary", p, len(b), size, hugePage)
	}
	b[0], b[size-1] = 1, 2 // writable end to end
	// Its own mapping (the huge-page advice keeps the kernel from merging
	// it with a neighbour), with none of the alignment's tail left.
	if end, ok := mappingAt(t, p); !ok || end != p+size {
		t.Fatalf("mapping at %#x ends at %#x (found %v), want %#x", p, end, ok, p+size)
	}
	if end, ok := mappingAt(t, p+size); ok {
		t.Fatalf("the alignment's tail %#x-%#x is still mapped", p+size, end)
	}
	freeDevice(b)
	if _, ok := mappingAt(t, p); ok {
		t.Fatalf("mapping at %#x still there after freeDevice", p)
	}
	small, err := allocDevice(100)
	if err != nil || len(small) != 100 {
		t.Fatalf("small buffer: %d bytes, %v", len(small), err)
	}
	freeDevice(small)
}
