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

// TestPluginsLinkNoHostPackage: the plugin wall. No plugin binary links a
// host package (pipeline/...) or viper: a plugin sees the contract
// (backend) and the engine, and evalrun kernels --spec plans the spec in
// the host and hands the rknn plugin the model and the Eval calls.
func TestPluginsLinkNoHostPackage(t *testing.T) {
	for _, plugin := range []string{"cpu", "rknn", "hexagon", "llamacpp"} {
		cmd := exec.Command("go", "list", "-deps", "./plugins/"+plugin)
		cmd.Dir = testkit.Root()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps: %v", err)
		}
		if !strings.Contains(string(out), "github.com/evalrun/evalrun/backend\n") {
			t.Fatalf("go list printed no dependencies:\n%s", out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.HasPrefix(pkg, "github.com/evalrun/evalrun/pipeline") || strings.Contains(pkg, "/viper") {
				t.Errorf("plugins/%s imports %s", plugin, pkg)
			}
		}
	}
}

// TestSummaryIsOnlyTheSchema: package summary, the schema of the result
// files that reports, comparisons and merges read, imports no other
// pipeline package.
func TestSummaryIsOnlyTheSchema(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./pipeline/summary")
	cmd.Dir = testkit.Root()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/evalrun/evalrun/pipeline") {
			t.Errorf("summary imports %s", pkg)
		}
	}
}
