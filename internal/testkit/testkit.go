// Package testkit is what evalrun's tests share: building the binaries they
// start as real processes, and reading llama.cpp's goldens in testdata/. It
// is imported by _test.go files only.
package testkit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Path is a path under the repository's root.
func Path(rel ...string) string { return filepath.Join(append([]string{Root()}, rel...)...) }

// Build compiles main packages (paths relative to the repository's root, as
// "./plugins/cpu") into dir, under the given file names.
//
// The links are what costs (about 3 s of CPU and 60k page faults a binary),
// and several test packages need the same binaries, so the binaries are
// linked into a directory kept between runs (in the user's cache, one per
// checkout), where go build relinks only what changed; each caller then
// gets copies of its own, so a later build cannot touch a binary a test
// still runs. A file lock serializes the packages go test runs at once.
func Build(dir string, bins map[string]string) error {
	cache, err := binCache()
	if err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(cache, ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	// One go build for all: the links run in parallel and the packages
	// load once. It names each binary after its package's directory, and
	// the names are given after.
	args := []string{"build", "-o", cache + string(filepath.Separator)}
	bases := map[string]bool{}
	for _, pkg := range bins {
		if bases[filepath.Base(pkg)] {
			return fmt.Errorf("testkit.Build: two packages named %s", filepath.Base(pkg))
		}
		bases[filepath.Base(pkg)] = true
		args = append(args, pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Stderr = Root(), os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", strings.Join(args[3:], " "), err)
	}
	for name, pkg := range bins {
		if err := copyExecutable(filepath.Join(cache, filepath.Base(pkg)), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// binCache is the directory Build links into: one per checkout (its
// absolute path hashed), so worktrees do not relink each other's binaries.
func binCache() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	root, err := filepath.Abs(Root())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	sub := filepath.Join("evalrun-testbin", hex.EncodeToString(sum[:8]))
	dir := filepath.Join(base, sub)
	if err := os.MkdirAll(dir, 0o755); err != nil { // a read-only home: the temp directory
		dir = filepath.Join(os.TempDir(), sub)
		return dir, os.MkdirAll(dir, 0o755)
	}
	return dir, nil
}

func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Main runs a package's tests with the binaries of bins built into a
// temporary directory first (built is told where) and removed after: call
// it from TestMain.
func Main(m *testing.M, bins map[string]string, built func(dir string)) {
	d, err := os.MkdirTemp("", "evalrun-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if err := Build(d, bins); err != nil {
		fmt.Fprintln(os.Stderr, "building test binaries:", err)
	} else {
		built(d)
		code = m.Run()
	}
	os.RemoveAll(d)
	os.Exit(code)
}

// F32 reads a raw little-endian float32 file (llama.cpp's logits goldens:
// row-major [n_tokens][n_vocab]).
func F32(t testing.TB, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%4 != 0 {
		t.Fatalf("%s: %d bytes is not a whole number of float32 values", path, len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// Golden is the JSON sidecar of a llama.cpp golden (testdata/llamacpp).
type Golden struct {
	TokenIDs     []int32 `json:"token_ids"`
	PromptIDs    []int32 `json:"prompt_ids"`
	GeneratedIDs []int32 `json:"generated_ids"`
	NVocab       int     `json:"n_vocab"`
}

// ReadGolden reads a golden's sidecar, path relative to testdata/llamacpp.
func ReadGolden(t testing.TB, rel string) Golden {
	t.Helper()
	b, err := os.ReadFile(Path("testdata", "llamacpp", rel))
	if err != nil {
		t.Fatal(err)
	}
	var g Golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return g
}

// Alive reports whether a process exists and is not a zombie (Linux /proc;
// elsewhere whether it can be signalled).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		p, err := os.FindProcess(pid)
		return err == nil && runtime.GOOS != "linux" && p.Signal(syscall.Signal(0)) == nil
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// WaitGone fails t unless pid is gone within limit (and then kills it).
func WaitGone(t testing.TB, what string, pid int, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !Alive(pid) {
			return
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Errorf("%s (pid %d) still running %v later", what, pid, limit)
}

// LlamaStats reads the "label: value [± err] [%]" lines of a
// llama-perplexity stdout golden (testdata/llamacpp/perplexity), keyed by the
// label with its padding collapsed ("Mean KLD", "Same top p"); percentages
// come back as fractions.
func LlamaStats(t testing.TB, name string) map[string][2]float64 {
	t.Helper()
	b, err := os.ReadFile(Path("testdata", "llamacpp", "perplexity", name))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		label, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		scale := 1.0
		if strings.Contains(rest, "%") {
			scale = 0.01
		}
		var v [2]float64
		parts := strings.Split(strings.ReplaceAll(rest, "%", ""), "±")
		for i, p := range parts[:min(2, len(parts))] {
			f, err := strconv.ParseFloat(strings.Replace(strings.TrimSpace(p), "-nan", "NaN", 1), 64)
			if err != nil {
				goto next
			}
			v[i] = f * scale
		}
		out[strings.Join(strings.Fields(label), " ")] = v
	next:
	}
	return out
}
