// Package atomicfile writes result files so that a reader sees either the
// old content or the complete new one, and locks a results directory against
// a second writer.
//
// Data goes to a temporary file .NAME.tmp-RANDOM in the destination's
// directory, created with the mode os.Create gives (0666 minus the umask);
// Commit syncs it, renames it over the destination and syncs the directory.
// On any error, and on Abort, the temporary file is removed: an interrupted
// or failed write leaves nothing behind. A process that exits on a signal
// without waiting for its writers calls RemoveTemporaries first (evalrun's
// plugin commands, evalrun quitting at once); one killed outright leaves
// its temporary files for Leftovers. A file that grows as a run goes
// (Publish) is moved into place once its first complete part is synced and
// then appended to in place.
package atomicfile

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// temporaries are this process's temporary files not yet renamed into place
// or removed, for RemoveTemporaries.
var temporaries struct {
	sync.Mutex
	names   map[string]bool
	removed bool // RemoveTemporaries ran: the process is exiting
}

// errExiting refuses a write that RemoveTemporaries overtook: the process
// was interrupted (it wraps context.Canceled, so callers report it so).
var errExiting = fmt.Errorf("the process is exiting: %w", context.Canceled)

// createTracked creates a temporary file and records it, unless the process
// is exiting: under the lock, so RemoveTemporaries misses no file.
func createTracked(name string) (*os.File, error) {
	temporaries.Lock()
	defer temporaries.Unlock()
	if temporaries.removed {
		return nil, errExiting
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, err
	}
	if temporaries.names == nil {
		temporaries.names = map[string]bool{}
	}
	temporaries.names[name] = true
	return f, nil
}

// removeTemporary removes the file under its temporary name.
func (f *File) removeTemporary() {
	temporaries.Lock()
	defer temporaries.Unlock()
	os.Remove(f.Name())
	delete(temporaries.names, f.Name())
}

// RemoveTemporaries removes the temporary files of every write in progress
// and makes any later Publish fail, for a process about to exit on a signal
// without waiting for its writers. It returns the names removed.
func RemoveTemporaries() []string {
	temporaries.Lock()
	defer temporaries.Unlock()
	temporaries.removed = true
	names := slices.Sorted(maps.Keys(temporaries.names))
	for _, n := range names {
		os.Remove(n)
	}
	clear(temporaries.names)
	return names
}

// File is a file being written that becomes Path on Commit.
type File struct {
	*os.File
	path      string
	published bool // renamed to path already (Publish)
}

// Create starts writing path. A path naming a directory is refused at once.
func Create(path string) (*File, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", path)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	for {
		var r [6]byte
		rand.Read(r[:])
		f, err := createTracked(filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(r[:])))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &File{File: f, path: path}, nil
	}
}

// Path is where the file goes on Commit.
func (f *File) Path() string { return f.path }

// Commit syncs and closes the file and renames it over Path (unless
// Publish did).
func (f *File) Commit() error {
	if f.published {
		err := f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err := f.Publish(); err != nil {
		return err
	}
	return f.Close()
}

// Publish syncs what was written and renames the file over Path, keeping it
// open: later writes go to Path itself (Sync them to make them durable).
// Commit then closes it; Abort closes it and leaves it in place.
func (f *File) Publish() error {
	if f.published {
		return nil
	}
	err := f.Sync()
	if err == nil {
		err = renameAll([]*File{f})
	}
	if err != nil {
		f.Close()
		f.removeTemporary()
		return err
	}
	syncDir(filepath.Dir(f.path))
	return nil
}

// CommitAll commits files that belong together (logits and their sidecar):
// all are synced, then renamed into place under one lock, so an
// interruption (RemoveTemporaries) or a failed sync (a full disk) leaves
// the old set or the new one. Only a crash between the renames, or a rename
// failing in between, could leave a mixed set. Abort the files after an
// error to remove what is left.
func CommitAll(files ...*File) error {
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := renameAll(files); err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, f := range files {
		f.Close()
		dirs[filepath.Dir(f.path)] = true
	}
	for dir := range dirs {
		syncDir(dir)
	}
	return nil
}

// syncDir makes renames in dir durable; not all systems can sync a
// directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// renameAll moves the files into place unless RemoveTemporaries ran (then
// they are gone): under its lock, so a file is renamed or removed, never
// both.
func renameAll(files []*File) error {
	temporaries.Lock()
	defer temporaries.Unlock()
	if temporaries.removed {
		return errExiting
	}
	for _, f := range files {
		if err := os.Rename(f.Name(), f.path); err != nil {
			return err
		}
		f.published = true
		delete(temporaries.names, f.Name())
	}
	return nil
}

// Abort discards the file, unless Publish moved it into place already.
func (f *File) Abort() {
	f.Close()
	if !f.published {
		f.removeTemporary()
	}
}

// Leftovers lists the temporary files of path that writers which never
// committed left behind (a process killed mid-write), for a caller that
// holds the directory's lock (LockDir) to remove; live files are left out.
func Leftovers(path string, live ...*File) []string {
	dir, base := filepath.Split(path)
	entries, _ := os.ReadDir(cmp.Or(dir, "."))
	var out []string
	for _, e := range entries {
		name := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), "."+base+".tmp-") && !slices.ContainsFunc(live, func(f *File) bool { return f != nil && f.Name() == name }) {
			out = append(out, name)
		}
	}
	return out
}

// WriteFile writes data to path atomically.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}
