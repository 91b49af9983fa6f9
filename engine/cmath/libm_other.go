//go:build !(linux && (amd64 || arm64))

package cmath

func loadLibm() (fs libm, name string, ok bool) { return libm{}, "", false }
