//go:build !rknpu

package rknnrt

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestStubExplainsHowToBuild(t *testing.T) {
	d, err := New()
	if d != nil || !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "-tags rknpu") {
		t.Errorf("New() = %v, %v", d, err)
	}
}

// TestCgoDriverAgainstFakeLibrary builds the fake librknnrt.so with gcc and
// runs this package's rknpu tests (cgo driver vs simulator, bit for bit)
// against it in a child `go test`.
func TestCgoDriverAgainstFakeLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a C library and a cgo test binary")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found")
	}
	dir := t.TempDir()
	build := exec.Command(gcc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-ffp-contract=off",
		"-shared", "-o", filepath.Join(dir, "librknnrt.so"), filepath.Join("testdata", "fakerknnrt", "fake_rknnrt.c"), "-lm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the fake library: %v\n%s", err, out)
	}
	gotest := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "test", "-tags", "rknpu", "-count=1", "-v", ".")
	gotest.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_LDFLAGS=-L"+dir, "LD_LIBRARY_PATH="+dir, "EVALRUN_RKNNRT_FAKE=1")
	out, err := gotest.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -tags rknpu against the fake library: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestMatchesSimulator") {
		t.Fatalf("the rknpu tests did not run:\n%s", out)
	}
	t.Logf("%s", out)
}
