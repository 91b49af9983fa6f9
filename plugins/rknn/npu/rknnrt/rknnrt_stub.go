//go:build !(rknpu && cgo)

// Package rknnrt drives the real RK3588 NPU through librknnrt.so. This build
// lacks it: the cgo driver needs the rknpu build tag and cgo.
package rknnrt

import (
	"errors"

	"github.com/evalrun/evalrun/plugins/rknn/npu"
)

// ErrNotBuilt is returned by New when the hardware driver is not compiled in.
var ErrNotBuilt = errors.New("hardware driver not built: rebuild with -tags rknpu on the board (needs librknnrt.so; see docs/npu-plugins.md)")

// New reports that the hardware driver is not part of this build.
func New() (npu.Driver, error) { return nil, ErrNotBuilt }
