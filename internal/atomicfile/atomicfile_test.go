//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileReplacesAtomicallyWithTheUmasksMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no umask")
	}
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if string(data) != "new" || st.Mode().Perm() != 0o640 {
		t.Errorf("content %q, mode %v; want new, 0640 (0666 minus umask 027)", data, st.Mode().Perm())
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v, want only the file", names)
	}
}

func TestFailedOrAbortedWritesLeaveNothing(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "out")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(sub, []byte("x")); err == nil {
		t.Error("writing over a directory succeeded")
	}
	f, err := Create(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	f.Abort()
	// A rename that fails (the destination became a directory) cleans up.
	f, err = Create(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "b"), 0o755)
	os.WriteFile(filepath.Join(dir, "b", "keep"), nil, 0o644)
	if err := f.Commit(); err == nil {
		t.Error("commit over a non-empty directory succeeded")
	}
	if names := entries(t, dir); len(names) != 2 || names[0] != "b" || names[1] != "out" {
		t.Errorf("directory holds %v, want only b/ and out/", names)
	}
}

func TestLockDirIsExclusive(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	dir := t.TempDir()
	unlock, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("second lock: err = %v, want ErrLocked", err)
	}
	unlock()
	unlock2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}
