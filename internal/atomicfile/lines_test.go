package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	l, err := CreateLines(path)
	if err != nil {
		t.Fatal(err)
	}
	l.WriteLine([]byte(`{"a":1}`))
	l.WriteLine([]byte(`{"b":2}`))
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the file shows before Commit")
	}
	if err := l.Commit(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("file %q", data)
	}

	aborted := filepath.Join(filepath.Dir(path), "y.jsonl")
	l, _ = CreateLines(aborted)
	l.WriteLine([]byte("1"))
	l.Abort()
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("after Abort: %d entries, want only x.jsonl", len(entries))
	}

	var none *Lines // a file not asked for
	none.WriteLine(nil)
	none.Abort()
	if err := none.Commit(); err != nil || none.File() != nil {
		t.Error(err)
	}
}
