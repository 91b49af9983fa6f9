package filehash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSHA256StopsWhenInterrupted: hashing a model (gigabytes) or a
// dataset gives way to Ctrl-C and otherwise hashes all of the file, across
// its 4 MiB reads.
func TestSHA256StopsWhenInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 9<<20+7)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	if got, err := SHA256(context.Background(), path); err != nil || got != hex.EncodeToString(want[:]) {
		t.Errorf("SHA256 = %s, %v; want %x", got, err, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := SHA256(ctx, path); !errors.Is(err, context.Canceled) {
		t.Errorf("SHA256 after Ctrl-C = %q, %v; want context.Canceled", got, err)
	}
}
