package engine

import (
	"strings"
	"testing"

	"github.com/evalrun/evalrun/engine/ggml"
)

// TestKernelsEnv: EVALRUN_KERNELS picks the set a model's matmuls run (make
// test runs the goldens with avx2 forced through it), and a set the machine
// cannot run fails Open with the variable's name.
func TestKernelsEnv(t *testing.T) {
	t.Setenv(ggml.KernelsEnv, "generic")
	m, err := Open(modelPath("F32"), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.Kernels().Name(); got != "generic" {
		t.Errorf("EVALRUN_KERNELS=generic: the model runs %s", got)
	}
	t.Setenv(ggml.KernelsEnv, "neon9")
	if _, err := Open(modelPath("F32"), Options{Threads: 1}); err == nil || !strings.Contains(err.Error(), "EVALRUN_KERNELS=neon9: no such kernel set") {
		t.Errorf("EVALRUN_KERNELS=neon9: %v", err)
	}
}
