//go:build unix

package testkit

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// HostilePaths makes, in dir, the paths a hostile user names instead of a
// file: a FIFO nobody writes to, a symlink to itself, and a 2 GB sparse file.
func HostilePaths(t testing.TB, dir string) (fifo, loop, sparse string) {
	t.Helper()
	fifo, loop, sparse = filepath.Join(dir, "fifo"), filepath.Join(dir, "loop"), filepath.Join(dir, "sparse.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(2 << 30); err != nil {
		t.Fatal(err)
	}
	return fifo, loop, sparse
}
