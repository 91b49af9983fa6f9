package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/evalrun/evalrun/engine/ggml"
	"github.com/evalrun/evalrun/engine/gguf"
	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/testkit"
	"github.com/evalrun/evalrun/pipeline/summary"
)

// The ways evalrun could hang, mislabel a backend or exit with the wrong
// code, each run as a user runs evalrun (the issues they come from:
// docs/design-notes.md, "Host robustness cases").

// caseSpec is a small spec over the bundled model; ROOT is the repository.
const caseSpec = `name: cases
model: {path: ROOT/models/stories260K.gguf}
datasets:
  - {name: stories, path: ROOT/datasets/stories.jsonl, mode: score, n_ctx: 64, limit: 2}
reference: {name: ref, plugin: cpu, threads: 1}
backends:
  - name: cand
    plugin: cpu
    threads: 1
bench: {enabled: false}
`

// writeCase writes a spec (ROOT replaced) into a fresh directory.
func writeCase(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "case.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "ROOT", testkit.Root())), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// started is an evalrun process started in a process group of its own.
type started struct {
	cmd      *exec.Cmd
	out, err *syncBuf
	done     chan struct{}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func start(t *testing.T, env []string, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.Command(filepath.Join(binDir, "evalrun"), args...), out: &syncBuf{}, err: &syncBuf{}, done: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Dir = "../.." // the repository, as evalrun() runs it
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.err
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); <-s.done })
	return s
}

// wait returns the exit code, failing t if evalrun runs longer than limit.
func (s *started) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(limit):
		t.Fatalf("evalrun still running after %v\nstdout:\n%s\nstderr:\n%s", limit, s.out, s.err)
	}
	if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return s.cmd.ProcessState.ExitCode()
}

// pids reads the "child plugin" pids a test plugin script wrote.
func pids(t *testing.T, file string) (child, plugin int) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(file)
		if f := strings.Fields(string(b)); len(f) == 2 && strings.HasSuffix(string(b), "\n") {
			child, _ = strconv.Atoi(f[0])
			plugin, _ = strconv.Atoi(f[1])
			return child, plugin
		}
	}
	t.Fatalf("the plugin script wrote no pids to %s", file)
	return 0, 0
}

func scriptEnv(t *testing.T) (env []string, pidFile string) {
	pidFile = filepath.Join(t.TempDir(), "pids")
	return []string{"TEST_EVALRUN_PIDFILE=" + pidFile, "TEST_EVALRUN_PLUGIN=" + filepath.Join(binDir, "evalrun-plugin-cpu")}, pidFile
}

// TestPluginChildrenCannotHangTheHost: a plugin whose child keeps its
// output open does not hang the host.
func TestPluginChildrenCannotHangTheHost(t *testing.T) {
	env, pidFile := scriptEnv(t)
	spec := strings.Replace(caseSpec, "    plugin: cpu\n", "    plugin_path: ROOT/cmd/evalrun/testdata/print-and-sleep.sh\n", 1)
	s := start(t, env, "run", writeCase(t, spec), "--out", t.TempDir())
	child, _ := pids(t, pidFile)
	if code := s.wait(t, 20*time.Second); code != 3 || !strings.Contains(s.out.String(), "hello") {
		t.Errorf("exit %d, want 3 and the plugin's line in the reason\n%s", code, s.out)
	}
	testkit.WaitGone(t, "the script's child", child, 5*time.Second)

	env, pidFile = scriptEnv(t)
	spec = strings.Replace(caseSpec, "    plugin: cpu\n", "    plugin_path: ROOT/cmd/evalrun/testdata/forking-plugin.sh\n", 1)
	s = start(t, env, "run", writeCase(t, spec), "--out", t.TempDir())
	child, plugin := pids(t, pidFile)
	if code := s.wait(t, 60*time.Second); code != 0 {
		t.Errorf("a plugin with a child: exit %d, want 0\n%s\n%s", code, s.out, s.err)
	}
	testkit.WaitGone(t, "the plugin's child", child, 5*time.Second)
	testkit.WaitGone(t, "the plugin", plugin, 5*time.Second)
}

// No process of a plugin's tree outlives the host by more than 5 s, however
// the host ends.
func TestHostSignalsEndThePluginTree(t *testing.T) {
	busy := strings.Replace(caseSpec, "limit: 2}", "limit: 2}\n  - {name: gen, path: ROOT/datasets/openings.jsonl, mode: generate, max_new_tokens: 1500}", 1)
	busy = strings.Replace(busy, "    plugin: cpu\n", "    plugin_path: ROOT/cmd/evalrun/testdata/forking-plugin.sh\n", 1)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			env, pidFile := scriptEnv(t)
			out := t.TempDir()
			s := start(t, env, "run", writeCase(t, busy), "--out", out)
			child, plugin := pids(t, pidFile)
			time.Sleep(500 * time.Millisecond)
			s.cmd.Process.Signal(sig)
			code := s.wait(t, 25*time.Second)
			if sig != syscall.SIGKILL && code != 3 {
				t.Errorf("exit %d after %v, want 3\n%s", code, sig, s.err)
			}
			testkit.WaitGone(t, "the plugin", plugin, 5*time.Second)
			testkit.WaitGone(t, "the plugin's child", child, 5*time.Second)
			if sig != syscall.SIGKILL {
				if sum := readSummary(t, out); !strings.Contains(strings.Join(sum.Verdict.Reasons, ";"), "interrupted") {
					t.Errorf("verdict %+v", sum.Verdict)
				}
			}
		})
	}
}

// TestSIGTERMToTheGroupDuringBench: SIGTERM to the whole process group
// during the bench pass stops it, blames no backend, benchmarks nothing
// more, and keeps the repetitions measured so far.
func TestSIGTERMToTheGroupDuringBench(t *testing.T) {
	// Short tests, many rounds: a round takes milliseconds, the pass seconds.
	spec := strings.Replace(caseSpec, "bench: {enabled: false}", "bench: {n_prompt: 16, n_gen: 4, reps: 1000}", 1)
	out := t.TempDir()
	s := start(t, nil, "run", writeCase(t, spec), "--out", out)
	// The score pass's line: the bench comes next.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.err.String(), "score [ref (ref), cand]: "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no bench pass:\n%s", s.err)
		}
	}
	time.Sleep(time.Second)
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	if code := s.wait(t, 25*time.Second); code != 3 {
		t.Fatalf("exit %d, want 3\n%s", code, s.err)
	}
	sum := readSummary(t, out)
	if sum.Reference.Status != "ok" || sum.Backends[0].Status != "ok" {
		t.Fatalf("reference %s (%s), candidate %s (%s)", sum.Reference.Status, sum.Reference.Error, sum.Backends[0].Status, sum.Backends[0].Error)
	}
	// Rounds alternate the backends (in a shuffled order): at the
	// interruption either is at most one repetition ahead, and far from the
	// 1000 asked for.
	n := func(tp *summary.Throughput) int {
		if tp == nil || tp.PP == nil {
			return 0
		}
		return len(tp.PP.SamplesNS)
	}
	nRef, nCand := n(sum.Reference.Throughput), n(sum.Backends[0].Throughput)
	t.Logf("pp16 repetitions kept: reference %d, candidate %d", nRef, nCand)
	if nRef == 0 || nRef >= 1000 || nRef-nCand > 1 || nCand-nRef > 1 {
		t.Errorf("pp16 repetitions kept: reference %d, candidate %d", nRef, nCand)
	}
}

// TestInterruptBeforeThePasses: Ctrl-C works before the passes: reading a
// spec from a FIFO, and tokenizing a large dataset.
func TestInterruptBeforeThePasses(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "spec.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	s := start(t, nil, "run", fifo)
	time.Sleep(300 * time.Millisecond)
	s.cmd.Process.Signal(syscall.SIGINT)
	if code := s.wait(t, 5*time.Second); code != 3 || !strings.Contains(s.err.String(), "interrupted") {
		t.Errorf("FIFO spec: exit %d\n%s", code, s.err)
	}

	big := filepath.Join(t.TempDir(), "big.jsonl")
	f, _ := os.Create(big)
	text := strings.Repeat("Once upon a time, there was a little girl named Lily. ", 10)
	for i := range 40000 { // ~22 MB
		fmt.Fprintf(f, "{\"id\": \"s%d\", \"text\": %q}\n", i, text)
	}
	f.Close()
	spec := strings.Replace(caseSpec, "ROOT/datasets/stories.jsonl, mode: score, n_ctx: 64, limit: 2", big+", mode: score, n_ctx: 64", 1)
	s = start(t, nil, "run", writeCase(t, spec), "--out", t.TempDir())
	// Signal while evalrun reads the dataset (hashed, then tokenized): once
	// it has the file open, not after a fixed sleep, which a quiet machine
	// can outrun.
	waitForOpen(t, s.cmd.Process.Pid, big)
	time.Sleep(50 * time.Millisecond) // likely past the hash, into the tokenizer; either stage is before the passes
	s.cmd.Process.Signal(syscall.SIGINT)
	if code := s.wait(t, 10*time.Second); code != 3 || !strings.Contains(s.err.String(), "interrupted") || strings.Contains(s.err.String(), "score [") {
		t.Errorf("large dataset: exit %d, want 3 and interrupted before the score pass\n%s", code, s.err)
	}
}

// waitForOpen waits until process pid has path open (Linux's /proc).
func waitForOpen(t *testing.T, pid int, path string) {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		fds, err := os.ReadDir(fdDir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Skipf("no /proc: %v", err)
		}
		for _, fd := range fds {
			if target, _ := os.Readlink(filepath.Join(fdDir, fd.Name())); target == path {
				return
			}
		}
	}
	t.Fatalf("evalrun never opened %s", path)
}

// rewriteModel copies the bundled model with one metadata value changed.
func rewriteModel(t *testing.T, key string, value any) string {
	return rewriteModelWith(t, key, value, "")
}

// rewriteModelWith is rewriteModel (a key not in the file is added) plus,
// unless tensor is "", an F32 tensor of 8 ones by that name.
func rewriteModelWith(t *testing.T, key string, value any, tensor string) string {
	t.Helper()
	f, err := gguf.Open(testkit.Path("models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	if _, ok := f.Get(key); !ok && key != "" {
		if err := w.AddKV(key, value); err != nil {
			t.Fatal(err)
		}
	}
	if tensor != "" {
		ones := make([]byte, 32)
		for i := range 8 {
			binary.LittleEndian.PutUint32(ones[4*i:], math.Float32bits(1))
		}
		if err := w.AddTensor(tensor, ggml.F32, []uint64{8}, ones); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range f.KVs {
		v := kv.Value
		if kv.Key == key {
			v = value
		}
		if kv.Key != "general.alignment" {
			if err := w.AddKV(kv.Key, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "edited.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// badInputLimit bounds each bad-input case: refused before any model is
// computed with, in seconds even on a loaded machine.
const badInputLimit = 30 * time.Second

// TestBadInputExitsTwo: bad input exits 2 (not 3, not 1), within a bounded
// time, with a message that names the file, line and key where there is one.
func TestBadInputExitsTwo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)
	long := filepath.Join(t.TempDir(), "long.jsonl")
	longPrompt := strings.Repeat("5,", 2100)
	os.WriteFile(long, []byte("{\"id\": \"short\", \"text\": \"Once\"}\n{\"id\": \"long\", \"tokens\": ["+longPrompt[:len(longPrompt)-1]+"]}\n"), 0o644)
	opts := func(o string) string {
		return strings.Replace(caseSpec, "    threads: 1\n", "    threads: 1\n    options: "+o+"\n", 1)
	}
	rknn := func(o string) string {
		return strings.Replace(opts(o), "    plugin: cpu\n", "    plugin: rknn\n", 1)
	}
	model := func(key string, v any) string {
		return strings.Replace(caseSpec, "ROOT/models/stories260K.gguf", rewriteModel(t, key, v), 1)
	}
	cases := []struct {
		name string
		spec string   // "" = args only
		args []string // after the spec path
		want string
	}{
		{"unwritable output.kld_base", strings.Replace(caseSpec, "    threads: 1\n", "    threads: 1\n    output: {kld_base: /nonexistent/dir/x.kld}\n", 1), nil, "case.yaml:10: backends[0].output.kld_base: cannot write"},
		{"--out naming a file", caseSpec, []string{"--out", file}, "exists and is not a directory"},
		{"unknown plugin option", opts("{typo_opt: 1}"), nil, `case.yaml:10: backends[0].options.typo_opt: cand refused its options: unknown option "typo_opt"`},
		{"invalid plugin option", rknn("{type: fp17}"), nil, `case.yaml:10: backends[0].options.type: cand refused its options: option "type": unknown type "fp17"`},
		{"head_count 0", model("llama.attention.head_count", uint32(0)), nil, "llama.attention.head_count: value 0 out of range"},
		{"block_count below the tensors", model("llama.block_count", uint32(4)), nil, "block 4, but llama.block_count is 4"},
		{"bos_token_id outside the vocabulary", model("tokenizer.ggml.bos_token_id", uint32(0xFFFFFFFF)), nil, "tokenizer.ggml.bos_token_id 4294967295 is outside the vocabulary of 512 tokens"},
		{"plugin ..", strings.Replace(caseSpec, "    plugin: cpu\n", "    plugin: \"..\"\n", 1), nil, `backends[0].plugin: "..": a plugin name`},
		{"plugin given as a path", strings.Replace(caseSpec, "    plugin: cpu\n", "    plugin: ./x.sh\n", 1), nil, "say plugin_path: to run an executable by its path"},
		{"threads 100000", strings.Replace(caseSpec, "threads: 1\n", "threads: 100000\n", 1), nil, "case.yaml:9: backends[0].threads: must be <="},
		{"bench beyond the context", strings.Replace(caseSpec, "bench: {enabled: false}", "bench: {n_prompt: 2000000000}", 1), nil, "bench.n_prompt: must be <= 16777216"},
		{"bench within limits, beyond the model", strings.Replace(caseSpec, "bench: {enabled: false}", "bench: {n_prompt: 4000}", 1), nil, "exceed the model's context_length 2048"},
		{"max_new_tokens beyond the context", strings.Replace(caseSpec, "limit: 2}", "limit: 2}\n  - {name: g, path: ROOT/datasets/openings.jsonl, mode: generate, max_new_tokens: 3000}", 1), nil, "max_new_tokens 3000 exceed the model's context_length 2048"},
		{"a prompt beyond the context", strings.Replace(caseSpec, "limit: 2}", "limit: 2}\n  - {name: g, path: "+long+", mode: generate, max_new_tokens: 4}", 1), nil, `long.jsonl:2: record "long": 2100 prompt tokens + max_new_tokens 4 exceed the model's context_length 2048`},
		{"n_ctx beyond the context", strings.Replace(caseSpec, "n_ctx: 64", "n_ctx: 4096", 1), nil, "datasets[0].n_ctx: 4096 exceeds the model's context_length 2048"},
		{"a spec without end", "", []string{"/dev/zero"}, "larger than 1024 KiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"run"}
			if c.spec != "" {
				args = append(args, writeCase(t, c.spec))
			}
			args = append(args, c.args...)
			if len(c.args) == 0 || c.args[0] != "--out" {
				args = append(args, "--out", t.TempDir())
			}
			s := start(t, nil, args...)
			if code := s.wait(t, badInputLimit); code != 2 || !strings.Contains(s.err.String(), c.want) {
				t.Errorf("exit %d, want 2 and %q in\n%s", code, c.want, s.err)
			}
		})
	}
	for _, c := range []struct{ flag, value, want string }{
		{"--temp", "-1", "--temp must be ≥ 0"}, {"--top-p", "7", "--top-p must be in (0, 1]"},
		{"--threads", "-4", "--threads: 1 to"}, {"--min-p", "2", "--min-p must be in [0, 1]"},
	} {
		s := start(t, nil, "generate", "--model", "models/stories260K.gguf", "--prompt", "x", "-n", "1", c.flag, c.value)
		if code := s.wait(t, badInputLimit); code != 2 || !strings.Contains(s.err.String(), c.want) {
			t.Errorf("generate %s %s: exit %d, want 2 and %q in %s", c.flag, c.value, code, c.want, s.err)
		}
	}
}

// TestResultFiles: --out naming a directory leaves nothing behind, result
// files follow the umask, and an earlier run's results (or a directory
// another evalrun is writing) are refused.
func TestResultFiles(t *testing.T) {
	// The temporary file would go beside DIR, in its parent.
	parent := t.TempDir()
	dir := filepath.Join(parent, "existing")
	os.Mkdir(dir, 0o755)
	r := evalrun(t, nil, "logits", "--model", "models/stories260K.gguf", "--tokens", "1,2", "--out", dir)
	inDir, _ := os.ReadDir(dir)
	beside, _ := os.ReadDir(parent)
	if r.code != 2 || !strings.Contains(r.stderr, dir+": is a directory") || len(inDir) != 0 || len(beside) != 1 {
		t.Errorf("logits --out DIR: exit %d, left %v in DIR and %v beside it\n%s", r.code, inDir, beside, r.stderr)
	}

	old := syscall.Umask(0o027)
	out := t.TempDir()
	r = evalrun(t, nil, "run", writeCase(t, caseSpec), "--out", out)
	syscall.Umask(old)
	for _, f := range []string{"summary.json", "report.md", "prompts.jsonl"} {
		if st, err := os.Stat(filepath.Join(out, f)); r.code != 0 || err != nil || st.Mode().Perm() != 0o640 {
			t.Errorf("%s: exit %d, %v, mode %v (want 0640 under umask 027)", f, r.code, err, st.Mode().Perm())
		}
	}

	// An earlier run's results are kept unless --force.
	r = evalrun(t, nil, "run", writeCase(t, caseSpec), "--out", out)
	if r.code != 2 || !strings.Contains(r.stderr, "holds the results of an earlier run (summary.json): choose another --out, or --force") {
		t.Errorf("--out holding a run: exit %d\n%s", r.code, r.stderr)
	}

	unlock, err := atomicfile.LockDir(out)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	r = evalrun(t, nil, "run", writeCase(t, caseSpec), "--out", out, "--force")
	if r.code != 2 || !strings.Contains(r.stderr, "another evalrun is writing there") {
		t.Errorf("a locked --out: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPluginLockFileAndPaths: plugins by path only when the spec says so
// (TestBadInputExitsTwo), checksums from a lock file beside the plugins,
// the binary's sha256 in summary.json with and without one, and bench
// --plugin PATH.
func TestPluginLockFileAndPaths(t *testing.T) {
	dir := t.TempDir()
	var pluginSum string
	for _, name := range []string{"evalrun", "evalrun-plugin-cpu"} {
		data, err := os.ReadFile(filepath.Join(binDir, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), data, 0o755)
		pluginSum = fmt.Sprintf("%x", sha256.Sum256(data))
	}
	run := func(lock string) (stdout string, code int, out string) {
		os.WriteFile(filepath.Join(dir, "plugins.sha256"), []byte(lock+"  evalrun-plugin-cpu\n"), 0o644)
		out = t.TempDir()
		cmd := exec.Command(filepath.Join(dir, "evalrun"), "run", writeCase(t, caseSpec), "--out", out)
		var buf bytes.Buffer
		cmd.Stdout = &buf
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return buf.String(), ee.ExitCode(), out
		}
		return buf.String(), 0, out
	}
	if stdout, code, _ := run(strings.Repeat("ab", 32)); code != 3 || !strings.Contains(stdout, "sha256 differs from plugins.sha256") {
		t.Errorf("a plugin that does not match the lock file: exit %d\n%s", code, stdout)
	}
	stdout, code, out := run(pluginSum)
	if code != 0 {
		t.Fatalf("a plugin the lock file lists: exit %d\n%s", code, stdout)
	}
	os.Remove(filepath.Join(dir, "plugins.sha256"))
	unlocked := t.TempDir()
	if r := evalrun(t, nil, "run", writeCase(t, caseSpec), "--out", unlocked); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	for _, d := range []string{out, unlocked} {
		for _, b := range readSummary(t, d).Backends {
			if b.PluginSHA256 != pluginSum {
				t.Errorf("%s: backend %s: plugin_sha256 %q, want the binary's %s", d, b.Name, b.PluginSHA256, pluginSum)
			}
		}
	}

	r := evalrun(t, nil, "bench", "--model", "models/stories260K.gguf", "--plugin", filepath.Join(binDir, "evalrun-plugin-cpu"), "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"kernels"`) {
		t.Errorf("bench --plugin PATH: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestUserPathsNeverHang: a path a user gives — the reference model, a
// backend's model, a dataset, a kernel list, a run to compare or merge —
// that is a FIFO, a device, a directory, a symlink loop or a 2 GB sparse
// file is refused with exit 2 and its name at once, never read without
// bound or waited on.
func TestUserPathsNeverHang(t *testing.T) {
	dir := t.TempDir()
	fifo, loop, sparse := testkit.HostilePaths(t, dir)
	base := strings.ReplaceAll(caseSpec, "ROOT", testkit.Root())
	model := testkit.Path("models", "stories260K.gguf")
	dataset := testkit.Path("datasets", "stories.jsonl")
	type c struct {
		name string
		args []string
		want string
	}
	var cases []c
	for _, bad := range []struct{ name, path, kind string }{
		{"FIFO", fifo, "not a regular file (a named pipe)"},
		{"/dev/zero", "/dev/zero", "not a regular file (a character device)"},
	} {
		spec := func(name, text string) string {
			p := filepath.Join(dir, strings.ReplaceAll(bad.name, "/", "")+"-"+name+".yaml")
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
		cases = append(cases,
			c{bad.name + " reference model", []string{"validate", spec("model", strings.Replace(base, model, bad.path, 1))}, bad.kind},
			c{bad.name + " backend model", []string{"validate", spec("bmodel", strings.Replace(base, "    threads: 1\n", "    threads: 1\n    model: "+bad.path+"\n", 1))}, bad.kind},
			c{bad.name + " dataset", []string{"validate", spec("data", strings.Replace(base, dataset, bad.path, 1))}, bad.kind},
			c{bad.name + " kernel list", []string{"validate", spec("kern", strings.Replace(base, "    plugin: cpu\n", "    plugin: rknn\n    options: {kernels: "+bad.path+"}\n", 1))}, bad.kind},
		)
	}
	run := filepath.Join(dir, "run")
	if r := evalrun(t, nil, "run", writeCase(t, caseSpec), "--out", run); r.code != 0 {
		t.Fatalf("run: %d\n%s", r.code, r.stderr)
	}
	for _, bad := range []struct{ path, want string }{
		{"/dev/zero", "not a regular file (a character device)"},
		{fifo, "not a regular file (a named pipe)"},
		{sparse, "2147483648 bytes, more than the"},
		{dir, "summary.json"},
		{loop, "too many levels of symbolic links"},
	} {
		cases = append(cases,
			c{"compare " + bad.path, []string{"compare", run, bad.path, "--out", filepath.Join(dir, "cmp")}, bad.want},
			c{"merge " + bad.path, []string{"merge", run, bad.path, "--out", filepath.Join(dir, "merged")}, ""},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Now()
			s := start(t, nil, c.args...)
			code := s.wait(t, 10*time.Second)
			took := time.Since(t0)
			t.Logf("exit %d after %v", code, took.Round(time.Millisecond))
			if code != 2 || !strings.Contains(s.err.String(), c.want) {
				t.Errorf("exit %d after %v, want 2 and %q in\n%s", code, took, c.want, s.err)
			}
			if took > 2*time.Second {
				t.Errorf("took %v, want the refusal within 2 s", took)
			}
		})
	}
}

// TestDetachedGrandchildEndsWithTheRun: a grandchild the plugin detaches
// with setsid (its own session and process group) ends with the run,
// whether the plugin is stopped at the end of the run or crashed before
// (its orphan is then the host's, a child subreaper).
func TestDetachedGrandchildEndsWithTheRun(t *testing.T) {
	for _, c := range []struct {
		name, plugin, options string
		want                  int
	}{
		{"stopped", "evalrun-plugin-cpu", "", 0},
		{"crashed", "evalrun-plugin-rknn", "    options: {faults: {crash_after: 3}}\n", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids")
			env := []string{"TEST_EVALRUN_PIDFILE=" + pidFile, "TEST_EVALRUN_PLUGIN=" + filepath.Join(binDir, c.plugin)}
			spec := strings.Replace(caseSpec, "    plugin: cpu\n", "    plugin_path: ROOT/cmd/evalrun/testdata/setsid-plugin.sh\n"+c.options, 1)
			s := start(t, env, "run", writeCase(t, spec), "--out", t.TempDir())
			child, _ := pids(t, pidFile)
			if code := s.wait(t, 60*time.Second); code != c.want {
				t.Errorf("exit %d, want %d\n%s", code, c.want, s.err)
			}
			testkit.WaitGone(t, "the plugin's setsid child", child, 5*time.Second)
		})
	}
}

// TestEarlyInterruptLeavesNoSocketDir: Ctrl-C while the plugins start
// leaves no socket directory (go-plugin's plugin-dir*, made before a plugin
// starts) in the temporary directory, at whatever moment it lands; nor does
// a whole run.
func TestEarlyInterruptLeavesNoSocketDir(t *testing.T) {
	tmp := t.TempDir()
	spec := writeCase(t, caseSpec)
	for i := range 12 {
		s := start(t, []string{"TMPDIR=" + tmp}, "run", spec, "--out", filepath.Join(t.TempDir(), "out"))
		time.Sleep(time.Duration(20+15*i) * time.Millisecond)
		s.cmd.Process.Signal(syscall.SIGINT)
		s.wait(t, 20*time.Second)
	}
	whole := start(t, []string{"TMPDIR=" + tmp}, "run", spec, "--out", filepath.Join(t.TempDir(), "out"))
	if code := whole.wait(t, 60*time.Second); code != 0 {
		t.Errorf("a whole run: exit %d\n%s", code, whole.err)
	}
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		entries, _ := os.ReadDir(tmp)
		left = left[:0]
		for _, e := range entries {
			left = append(left, e.Name())
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}

// TestLyingPlugins: a plugin that lies in each way the contract allows (the
// liar: the CPU plugin with one answer bent, $TEST_EVALRUN_LIE) gets the
// label of its fault and exit 3 — or, where its lie is an accuracy result
// (NaN logits), the verdict's — while the reference and the honest
// candidate keep their results, and no process of its tree outlives the
// run.
func TestLyingPlugins(t *testing.T) {
	// Each case's liar is a link of its own, so that the processes left
	// are looked for among this case's only (other runs of the liar may be
	// going on: a developer's other worktree).
	liarSpec := func(t *testing.T, eval string) (spec, liar string) {
		liar = filepath.Join(t.TempDir(), "evalrun-plugin-liar")
		if err := os.Symlink(filepath.Join(binDir, "evalrun-plugin-liar"), liar); err != nil {
			t.Fatal(err)
		}
		spec = strings.Replace(caseSpec, "backends:\n", "backends:\n  - {name: liar, plugin_path: "+liar+", threads: 1}\n", 1)
		spec = strings.Replace(spec, "bench: {enabled: false}", "bench: {enabled: true, n_prompt: 8, n_gen: 2, reps: 2}\ntimeouts: {eval: "+eval+", bench: 3s}", 1)
		return writeCase(t, spec), liar
	}
	for _, c := range []struct {
		lie, status, error string
		exit               int
	}{
		{"load-memory", summary.StatusFailed, "impossible memory size of -4096 bytes", 3},
		{"load-ns", summary.StatusFailed, "impossible load and warm-up times (-1 ns", 3},
		{"row-index", summary.StatusFailed, "the row of token 32 where token 33's was due", 3},
		{"row-short", summary.StatusFailed, "a row of 511 logits, the vocabulary has 512", 3},
		{"rows-extra", summary.StatusFailed, "more logits rows than requested", 3},
		{"rows-fewer", summary.StatusFailed, "fewer logits rows than requested", 3},
		{"row-nan", summary.StatusOK, "", 1},
		{"stream-stall", summary.StatusTimeout, "timed out", 3},
		{"huge-row", summary.StatusFailed, "larger than max", 3},
		{"bench-negative", summary.StatusFailed, "impossible time for repetition 1: -1 ns", 3},
		{"bench-count", summary.StatusFailed, "the plugin returned 0 samples for 1 repetitions", 3},
		{"bench-hang", summary.StatusTimeout, "timed out after 3s", 3},
		{"fork", summary.StatusOK, "", 0},
		{"setsid", summary.StatusOK, "", 0},
		// Rows in shared memory (Linux): a place or length other than the
		// row's slot is refused, its value named; a plugin that writes
		// where its region was crashes, alone.
		{"shm-offset", summary.StatusFailed, "the plugin reports offset 16785408; row 1 of the call belongs at 6144", 3},
		{"shm-slot", summary.StatusFailed, "the plugin reports offset 8192; row 1 of the call belongs at 6144", 3},
		{"shm-length", summary.StatusFailed, "the plugin reports 16775168 bytes; want a whole number of float32 values, at most the slot's 2048", 3},
		{"shm-both", summary.StatusFailed, "the chunk also carries its logits in the message", 3},
		{"shm-unmapped", summary.StatusCrashed, "crashed during Eval", 3},
	} {
		t.Run(c.lie, func(t *testing.T) {
			if strings.HasPrefix(c.lie, "shm-") && runtime.GOOS != "linux" {
				t.Skip("rows move in shared memory on Linux only")
			}
			// huge-row marshals 288 MiB before the host can refuse it:
			// seconds on a loaded machine (8 s did not do at load 14).
			eval := "8s"
			if c.lie == "huge-row" {
				eval = "60s"
			}
			specFile, liarPath := liarSpec(t, eval)
			pidFile := filepath.Join(t.TempDir(), "pid")
			out := t.TempDir()
			s := start(t, []string{"TEST_EVALRUN_LIE=" + c.lie, "TEST_EVALRUN_PIDFILE=" + pidFile}, "run", specFile, "--out", out)
			code := s.wait(t, 90*time.Second)
			sum := readSummary(t, out)
			liar, good := sum.Backends[0], sum.Backends[1]
			t.Logf("exit %d, liar %s %q", code, liar.Status, liar.Error)
			if code != c.exit || liar.Status != c.status || !strings.Contains(liar.Error, c.error) {
				t.Errorf("exit %d, liar %s %q; want exit %d, %s %q\n%s", code, liar.Status, liar.Error, c.exit, c.status, c.error, s.err)
			}
			if sum.Reference.Status != summary.StatusOK || good.Status != summary.StatusOK || good.Accuracy == nil || good.Throughput == nil {
				t.Errorf("the others lost results: reference %s, cand %s %q", sum.Reference.Status, good.Status, good.Error)
			}
			if b, err := os.ReadFile(pidFile); err == nil {
				child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				testkit.WaitGone(t, "the liar's child", child, 5*time.Second)
			} else if c.lie == "fork" || c.lie == "setsid" {
				t.Errorf("the liar wrote no child pid: %v", err)
			}
			// A killed process that held hundreds of MiB takes a moment
			// to be gone.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				out, _ := exec.Command("pgrep", "-f", liarPath).Output()
				if len(out) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("liar processes left 10 s after the run: %s", out)
					break
				}
			}
		})
	}
}

// TestSharedRowsAreBitIdentical: a run whose plugins move their rows
// through shared memory (the default, on Linux) and the same run with
// EVALRUN_PLUGIN_SHM=off, every row in a gRPC message, return the same
// logits, bit for bit (the digests of every backend's rows), on the score
// and generate passes; the summary counts the rows each way.
func TestSharedRowsAreBitIdentical(t *testing.T) {
	spec := writeCase(t, `name: shm
model: {path: ROOT/models/stories260K.gguf}
datasets:
  - {name: stories, path: ROOT/datasets/stories.jsonl, mode: score, n_ctx: 64, limit: 2}
  - {name: openings, path: ROOT/datasets/openings.jsonl, mode: generate, max_new_tokens: 6, limit: 2}
reference: {name: ref, plugin: cpu, threads: 1}
backends:
  - {name: npu, plugin: rknn, threads: 1, options: {driver: sim, type: fp16, cores: 3}}
  - {name: ggml, plugin: cpu, threads: 1, options: {numerics: ggml}}
bench: {enabled: false}
`)
	sums := map[string]*summary.Summary{}
	for _, shm := range []string{"on", "off"} {
		out := t.TempDir()
		if r := evalrun(t, []string{"EVALRUN_PLUGIN_SHM=" + shm}, "run", spec, "--out", out, "--quiet"); r.code != 0 {
			t.Fatalf("shm %s: exit %d\n%s", shm, r.code, r.stderr)
		}
		sums[shm] = readSummary(t, out)
	}
	on, off := sums["on"], sums["off"]
	for _, s := range []*summary.Summary{on, off} {
		if h := s.Host; h == nil || h.HostCPUS == nil || *h.HostCPUS <= 0 || *h.HostCPUS > 2*float64(runtime.NumCPU())*h.PassesS {
			t.Errorf("host block %+v: want the host's CPU time in the passes", h)
		}
	}
	pairs := [][2]summary.BackendSummary{{on.Reference, off.Reference}}
	for i := range on.Backends {
		pairs = append(pairs, [2]summary.BackendSummary{on.Backends[i], off.Backends[i]})
	}
	for _, p := range pairs {
		a, b := p[0], p[1]
		if a.Digest == nil || b.Digest == nil || a.Eval == nil || b.Eval == nil {
			t.Fatalf("%s: no digest or eval timing", a.Name)
		}
		if *a.Digest != *b.Digest || a.Digest.Rows == 0 {
			t.Errorf("%s: logits through shared memory %+v, in messages %+v", a.Name, *a.Digest, *b.Digest)
		}
		want := a.Eval.Rows
		if runtime.GOOS != "linux" {
			want = 0
		}
		if a.Eval.SharedRows != int64(want) || b.Eval.SharedRows != 0 {
			t.Errorf("%s: %d of %d rows through shared memory with it on, %d with it off; want %d and 0", a.Name, a.Eval.SharedRows, a.Eval.Rows, b.Eval.SharedRows, want)
		}
	}
}
