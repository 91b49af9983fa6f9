//go:build !unix

package backend

import (
	"errors"
	"os"
)

// mapRows: no shared rows outside Unix.
func mapRows(*os.File) (*rowRegion, error) {
	return nil, errors.New("shared rows: not supported on this system")
}
