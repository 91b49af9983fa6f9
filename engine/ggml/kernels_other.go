//go:build !amd64

package ggml

// simdKernels: only the generic kernels outside amd64 (NEON kernels for the
// RK3588's aarch64 cores are future work).
func simdKernels() []Kernels { return nil }
