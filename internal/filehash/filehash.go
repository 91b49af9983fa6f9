// Package filehash hashes files that may be gigabytes (models, datasets),
// giving way when the caller is interrupted.
package filehash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"

	"github.com/evalrun/evalrun/internal/userfile"
)

// SHA256 is the hex sha256 of a regular file (userfile.Open: a FIFO or a
// device is refused, not read), stopping when ctx ends.
func SHA256(ctx context.Context, path string) (string, error) {
	f, err := userfile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if _, err := io.CopyN(h, f, 4<<20); errors.Is(err, io.EOF) {
			return hex.EncodeToString(h.Sum(nil)), nil
		} else if err != nil {
			return "", err
		}
	}
}
