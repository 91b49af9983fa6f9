package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/evalrun/evalrun/internal/testkit"
)

// TestHostLinksNoPlugin: evalrun's binary links no plugin package (the NPU
// simulator, the cgo RKNN driver, libllama's bindings stay in their plugin
// binaries; evalrun kernels/ops run the rknn plugin), nor the engine code only
// its commands need (evalrun synth and the others run the cpu plugin), with
// or without the build tags the plugins take.
func TestHostLinksNoPlugin(t *testing.T) {
	for _, tags := range []string{"", "rknpu"} {
		cmd := exec.Command("go", "list", "-deps", "-tags", tags, "./cmd/evalrun")
		cmd.Dir = testkit.Root()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps -tags %q: %v", tags, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.HasPrefix(pkg, "github.com/evalrun/evalrun/plugins/") || pkg == "github.com/evalrun/evalrun/engine/synth" {
				t.Errorf("-tags %q: the host imports %s", tags, pkg)
			}
		}
		if !strings.Contains(string(out), "github.com/evalrun/evalrun/backend\n") {
			t.Fatalf("go list printed no dependencies:\n%s", out)
		}
	}
}

// TestPluginsLinkNoRunner: no plugin binary links the host's runner
// (package pipeline and the verdict it builds); the rknn plugin's kernels
// --spec needs only the spec and its plan.
func TestPluginsLinkNoRunner(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./plugins/cpu", "./plugins/rknn", "./plugins/hexagon", "./plugins/llamacpp")
	cmd.Dir = testkit.Root()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range []string{"pipeline", "pipeline/verdict"} {
		if strings.Contains(string(out), "github.com/evalrun/evalrun/"+pkg+"\n") {
			t.Errorf("a plugin imports %s", pkg)
		}
	}
	if !strings.Contains(string(out), "github.com/evalrun/evalrun/pipeline/plan\n") {
		t.Fatalf("go list printed no plan package (the rknn plugin's kernels --spec):\n%s", out)
	}
}
