package backend

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHostRegionIsSealed: the plugin holds the region's descriptor, and
// a region shrunk under the host's mapping would make the host's reads
// fault; it is sealed at its size, seals included, so the plugin can change
// neither, and it maps it whole.
func TestHostRegionIsSealed(t *testing.T) {
	r, f, err := newHostRows()
	if err != nil || r == nil {
		t.Fatalf("newHostRows: %v", err)
	}
	defer r.close()
	defer f.Close()
	fd := int(f.Fd())
	for _, size := range []int64{0, rowsRegion - 4096, rowsRegion + 4096} {
		if err := unix.Ftruncate(fd, size); !errors.Is(err, unix.EPERM) {
			t.Errorf("ftruncate to %d: %v, want EPERM", size, err)
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); !errors.Is(err, unix.EPERM) {
		t.Errorf("adding a seal: %v, want EPERM", err)
	}
	p, err := mapRows(f)
	if err != nil {
		t.Fatalf("mapRows: %v", err)
	}
	defer p.close()
	if string(p.pluginToken()) != string(r.token) || len(p.mem) != rowsRegion {
		t.Errorf("the plugin maps %d bytes, token %x; the host made %d, token %x", len(p.mem), p.pluginToken(), rowsRegion, r.token)
	}
	p.mem[rowsHeader] = 42
	if r.mem[rowsHeader] != 42 {
		t.Error("the two mappings do not share memory")
	}
}
