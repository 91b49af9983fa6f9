package ggml

import (
	"os/exec"
	"testing"
)

// TestNEONEncodings: every WORD of the NEON kernels is the encoding of the
// instruction its comment names (tools/neonasm.sh -check assembles the
// comments with binutils' aarch64 assembler; skipped where it is missing).
func TestNEONEncodings(t *testing.T) {
	if _, err := exec.LookPath("aarch64-linux-gnu-as"); err != nil {
		t.Skip("needs aarch64-linux-gnu-as (binutils-aarch64-linux-gnu)")
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("needs perl")
	}
	out, err := exec.Command("../../tools/neonasm.sh", "-check", "kernels_neon_arm64.s").CombinedOutput()
	if err != nil {
		t.Fatalf("tools/neonasm.sh -check: %v\n%s", err, out)
	}
}
