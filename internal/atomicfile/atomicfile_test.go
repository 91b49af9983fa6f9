//go:build unix

package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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

// TestPublishedFileGrowsInPlace: a published file replaces the old one at
// once with what was written so far, later writes land in it, and neither
// Commit nor Abort loses it; Leftovers names a dead writer's temporary file
// but not a live one's.
func TestPublishedFileGrowsInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "units.jsonl")
	os.WriteFile(path, []byte("old\n"), 0o644)
	dead, _ := Create(path) // a writer killed before it published
	dead.WriteString("lost")
	for _, end := range []string{"commit", "abort"} {
		f, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := Leftovers(path, f); len(got) != 1 || got[0] != dead.Name() {
			t.Fatalf("leftovers %v, want only %s", got, dead.Name())
		}
		f.WriteString("head\n")
		if data, _ := os.ReadFile(path); string(data) == "head\n" {
			t.Fatal("visible before Publish")
		}
		if err := f.Publish(); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(path); string(data) != "head\n" {
			t.Fatalf("after Publish: %q", data)
		}
		f.WriteString("unit\n")
		if end == "commit" {
			if err := f.Commit(); err != nil {
				t.Fatal(err)
			}
		} else {
			f.Abort()
		}
		if data, _ := os.ReadFile(path); string(data) != "head\nunit\n" {
			t.Fatalf("after %s: %q", end, data)
		}
	}
	if names := entries(t, dir); len(names) != 2 {
		t.Errorf("directory holds %v, want the file and the dead writer's", names)
	}
}

// TestRemoveTemporaries: a process exiting on a signal removes the files
// being written and keeps the ones already in place; a write that would
// finish afterwards fails instead of renaming a file that is gone.
func TestRemoveTemporaries(t *testing.T) {
	t.Cleanup(func() { temporaries.Lock(); temporaries.removed = false; temporaries.Unlock() })
	dir := t.TempDir()
	done := filepath.Join(dir, "done.json")
	if err := WriteFile(done, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	aborted, _ := Create(filepath.Join(dir, "aborted"))
	aborted.Abort()
	live, err := Create(filepath.Join(dir, "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	live.WriteString("half a model")
	growing, _ := Create(filepath.Join(dir, "units.jsonl")) // published, still appended to
	growing.WriteString("unit 1\n")
	if err := growing.Publish(); err != nil {
		t.Fatal(err)
	}

	if got := RemoveTemporaries(); !slices.Contains(got, live.Name()) {
		t.Errorf("removed %v, not %s", got, live.Name())
	}
	if err := live.Commit(); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit after RemoveTemporaries: %v, want an interruption", err)
	}
	if _, err := Create(filepath.Join(dir, "late.json")); !errors.Is(err, context.Canceled) {
		t.Errorf("Create after RemoveTemporaries: %v, want an interruption", err)
	}
	growing.WriteString("unit 2\n")
	if err := growing.Commit(); err != nil {
		t.Errorf("a published file: %v", err)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[done.json units.jsonl]" {
		t.Errorf("left in the directory: %v, want done.json and units.jsonl", names)
	}
}

// TestCommitAll: files that belong together appear together: the new set
// after CommitAll, the old one when the process is exiting first.
func TestCommitAll(t *testing.T) {
	t.Cleanup(func() { temporaries.Lock(); temporaries.removed = false; temporaries.Unlock() })
	dir := t.TempDir()
	logits, side := filepath.Join(dir, "l"), filepath.Join(dir, "l.json")
	write := func(tag string) []*File {
		var fs []*File
		for _, p := range []string{logits, side} {
			f, err := Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(tag)
			fs = append(fs, f)
		}
		return fs
	}
	read := func() string {
		a, _ := os.ReadFile(logits)
		b, _ := os.ReadFile(side)
		return string(a) + "+" + string(b)
	}
	if err := CommitAll(write("old")...); err != nil || read() != "old+old" {
		t.Fatalf("CommitAll: %v, files %s", err, read())
	}
	fs := write("new") // the sidecar cannot be synced: neither file moves
	fs[1].File.Close()
	if err := CommitAll(fs...); err == nil || read() != "old+old" {
		t.Errorf("CommitAll with a failing sync: %v, files %s; want an error and the old pair", err, read())
	}
	for _, f := range fs {
		f.Abort()
	}
	fs = write("new")
	RemoveTemporaries()
	if err := CommitAll(fs...); !errors.Is(err, context.Canceled) || read() != "old+old" {
		t.Errorf("CommitAll after RemoveTemporaries: %v, files %s; want an interruption and the old pair", err, read())
	}
	for _, f := range fs {
		f.Abort()
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left in the directory: %v", entries)
	}
}
