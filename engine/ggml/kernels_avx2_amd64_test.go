//go:build amd64

package ggml

import (
	"os"
	"regexp"
	"testing"
)

// TestAVX2KernelsNeedNoAVX512: the AVX2 set runs on CPUs without AVX-512,
// so its assembly uses no EVEX-only register (X/Y16-31, ZMM, opmasks) and
// no instruction of an AVX-512 set.
// avo's allocator takes the lowest free registers; this catches a kernel
// whose register pressure pushed it past Y15.
func TestAVX2KernelsNeedNoAVX512(t *testing.T) {
	src, err := os.ReadFile("kernels_avx2_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	evex := regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[1-7])\b|_BCST|_Z\b`)
	if m := evex.Find(src); m != nil {
		t.Fatalf("kernels_avx2_amd64.s uses %s, which needs AVX-512", m)
	}
	// An AVX-512 instruction on low registers (VMOVDQU32 Y2, VPDPBUSD Y0):
	// avo lists each function's instruction sets.
	if m := regexp.MustCompile(`// Requires:.*AVX512[A-Z_]*`).Find(src); m != nil {
		t.Fatalf("kernels_avx2_amd64.s: %s", m)
	}
}
