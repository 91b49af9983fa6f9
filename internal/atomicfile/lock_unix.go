//go:build unix

package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockName is the lock file LockDir keeps in a directory.
const LockName = ".evalrun.lock"

// ErrLocked is returned by LockDir when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// LockDir takes an exclusive lock on dir (flock on dir/.evalrun.lock), so
// two runs never write the same results directory at once. The lock ends
// with unlock or with the process; the empty lock file stays.
func LockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
		return nil, err
	}
	// The file stays: removing it would let a third process lock a new
	// file while a second one still holds the old one.
	return func() { f.Close() }, nil
}
