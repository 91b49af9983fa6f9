// Package cmath gives the engine the C library's single-precision expf,
// sinf, cosf, powf and logf (and tanhf, written here as x86-64 glibc
// computes it: tanhf.go), the functions llama.cpp's CPU backend calls
// (RoPE's cos/sin cache, its scale and YaRN's corrections, SiLU on the
// elements past a 16-lane block). The
// C library's results are not always correctly rounded, so matching
// llama.cpp bit for bit means calling the same functions: on Linux the
// process's libm is loaded at first use (github.com/ebitengine/purego, no
// cgo). Where it cannot be loaded, correctly rounded Go versions stand in
// and Source reports it.
package cmath

import (
	"math"
	"sync"
)

// libm holds the functions, from the C library or the Go stand-ins.
type libm struct {
	expf, sinf, cosf, logf, tanhf func(float32) float32
	powf                          func(float32, float32) float32
}

var (
	once   sync.Once
	fns    = libm{expf: goExpf, sinf: goSinf, cosf: goCosf, logf: goLogf, powf: goPowf}
	source = "go"
)

func load() {
	once.Do(func() {
		if fs, name, ok := loadLibm(); ok {
			fns, source = fs, name
		}
	})
}

// Source names where the functions come from: the C library's file name
// (e.g. "libm.so.6") or "go" when it could not be loaded.
func Source() string { load(); return source }

// Expf is the C library's expf.
func Expf(x float32) float32 { load(); return fns.expf(x) }

// Sinf is the C library's sinf.
func Sinf(x float32) float32 { load(); return fns.sinf(x) }

// Cosf is the C library's cosf.
func Cosf(x float32) float32 { load(); return fns.cosf(x) }

// Logf is the C library's logf.
func Logf(x float32) float32 { load(); return fns.logf(x) }

// Powf is the C library's powf.
func Powf(x, y float32) float32 { load(); return fns.powf(x, y) }

// The stand-ins: float64 evaluation rounded once to float32.
func goExpf(x float32) float32    { return float32(math.Exp(float64(x))) }
func goSinf(x float32) float32    { return float32(math.Sin(float64(x))) }
func goCosf(x float32) float32    { return float32(math.Cos(float64(x))) }
func goLogf(x float32) float32    { return float32(math.Log(float64(x))) }
func goPowf(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }
