//go:build unix

package userfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/internal/testkit"
)

// Every kind of path a user can name that is not a regular file is
// refused at once, naming the path and its kind; a regular file opens and
// reads; a file over the bound (a 2 GB sparse one) is refused before a byte
// is read.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo, loop, sparse := testkit.HostilePaths(t, dir)
	regular := filepath.Join(dir, "ok.txt")
	if err := os.WriteFile(regular, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string
		is         error
	}{
		{fifo, "not a regular file (a named pipe)", ErrNotRegular},
		{"/dev/zero", "not a regular file (a character device)", ErrNotRegular},
		{dir, "not a regular file (a directory)", ErrNotRegular},
		{loop, "too many levels of symbolic links", nil},
		{filepath.Join(dir, "missing"), "no such file", os.ErrNotExist},
	} {
		t0 := time.Now()
		f, err := Open(c.path)
		if err == nil {
			f.Close()
		}
		if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("Open(%s): %v; want an error naming it and %q", c.path, err, c.want)
		}
		if d := time.Since(t0); d > time.Second {
			t.Errorf("Open(%s) took %v", c.path, d)
		}
		if _, err := ReadFile(c.path, 1<<20); err == nil {
			t.Errorf("ReadFile(%s) read it", c.path)
		}
	}
	if b, err := ReadFile(regular, 5); err != nil || string(b) != "hello" {
		t.Errorf("ReadFile(regular, 5) = %q, %v", b, err)
	}
	if _, err := ReadFile(regular, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadFile(regular, 4): %v, want ErrTooLarge", err)
	}
	if _, err := ReadFile(sparse, 256<<20); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "2147483648 bytes") {
		t.Errorf("ReadFile(2 GB sparse file): %v, want ErrTooLarge naming its size", err)
	}
}
