package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalrun/evalrun/internal/testkit"
)

// TestEngineCommandsRunTheCPUPlugin: evalrun inspect|tokenize|generate|
// logits|synth are the cpu plugin's commands (their golden checks are beside
// them in plugins/cpu): arguments, output and exit code pass through, --help
// is the plugin's, and without the plugin evalrun says which binary is missing.
func TestEngineCommandsRunTheCPUPlugin(t *testing.T) {
	g := testkit.ReadGolden(t, "logits/p3.F32.plain.json")
	r := evalrun(t, nil, "tokenize", "--model", "models/stories260K.gguf",
		"The little girl walked into the forest with her basket. She wanted to pick berries for her mother. Soon she found a bush full of red berries. She picked one and ate it. It was sweet! Then she heard a small sound behind the bush.")
	var ids []int32
	if err := json.Unmarshal([]byte(r.stdout), &ids); r.code != 0 || err != nil || fmt.Sprint(ids) != fmt.Sprint(g.TokenIDs) {
		t.Fatalf("tokenize: exit %d, %v %q, want %v", r.code, err, r.stdout, g.TokenIDs)
	}

	out := filepath.Join(t.TempDir(), "p3.f32")
	r = evalrun(t, nil, "logits", "--model", "models/stories260K.gguf", "--tokens", "1,403,407", "--out", out, "--threads", "2")
	raw, _ := os.ReadFile(out)
	var meta struct {
		Shape []int  `json:"logits_shape"`
		Sum   string `json:"sha256_of_logits_file"`
	}
	side, _ := os.ReadFile(out + ".json")
	if err := json.Unmarshal(side, &meta); r.code != 0 || err != nil || fmt.Sprint(meta.Shape) != "[3 512]" || len(raw) != 3*512*4 || meta.Sum != fmt.Sprintf("%x", sha256.Sum256(raw)) {
		t.Fatalf("logits: exit %d, %d bytes, sidecar %v %+v\n%s", r.code, len(raw), err, meta, r.stderr)
	}

	for _, args := range [][]string{{"generate", "--help"}, {"help", "generate"}} {
		r = evalrun(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "evalrun generate --model M --prompt P -n N [flags]") || !strings.Contains(r.stdout, "--repeat-penalty") {
			t.Errorf("evalrun %s: exit %d, not the plugin's flags:\n%s", strings.Join(args, " "), r.code, r.stdout)
		}
	}

	// evalrun inspect M | head: the reader gone, the command ends quietly
	// with the shell's SIGPIPE code.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	cmd := exec.Command(filepath.Join(binDir, "evalrun"), "inspect", "models/stories260K.gguf")
	var stderr strings.Builder
	cmd.Dir, cmd.Stdout, cmd.Stderr = "../..", pw, &stderr
	err = cmd.Run()
	pw.Close()
	if code := cmd.ProcessState.ExitCode(); code != 141 || stderr.Len() > 0 {
		t.Errorf("inspect into a closed pipe: exit %d (%v), want 141 and no message\n%s", code, err, stderr.String())
	}

	// evalrun alone: no plugin beside it or in $EVALRUN_PLUGIN_DIR.
	alone := t.TempDir()
	data, err := os.ReadFile(filepath.Join(binDir, "evalrun"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(alone, "evalrun"), data, 0o755)
	cmd = exec.Command(filepath.Join(alone, "evalrun"), "generate", "--model", "models/stories260K.gguf", "--prompt", "x", "-n", "1")
	cmd.Dir, cmd.Env = "../..", append(os.Environ(), "EVALRUN_PLUGIN_DIR="+t.TempDir())
	msg, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(msg), "evalrun: generate is a command of evalrun-plugin-cpu: find plugin \"cpu\": no evalrun-plugin-cpu in ") ||
		!strings.Contains(string(msg), "make build builds it") {
		t.Errorf("generate without the cpu plugin: %v\n%s", err, msg)
	}
	cmd = exec.Command(filepath.Join(alone, "evalrun"), "help", "generate")
	cmd.Env = append(os.Environ(), "EVALRUN_PLUGIN_DIR="+t.TempDir())
	if msg, err = cmd.CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(msg), "no evalrun-plugin-cpu in") {
		t.Errorf("help generate without the cpu plugin: %v, want exit 3 as generate --help\n%s", err, msg)
	}
}

// TestToolCommandsCheckTheLockFile: a plugin's own command runs only if the
// binary matches plugins.sha256 beside it, as a run's plugins must.
func TestToolCommandsCheckTheLockFile(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(binDir, "evalrun-plugin-cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "evalrun-plugin-cpu"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	lock := func(sum [32]byte) {
		line := fmt.Sprintf("%x  evalrun-plugin-cpu\n", sum)
		if err := os.WriteFile(filepath.Join(dir, "plugins.sha256"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"EVALRUN_PLUGIN_DIR=" + dir}
	sum := sha256.Sum256(data)
	lock(sum)
	if r := evalrun(t, env, "inspect", "models/stories260K.gguf"); r.code != 0 {
		t.Fatalf("listed with its sha256: exit %d\n%s", r.code, r.stderr)
	}
	sum[0] ^= 1
	lock(sum)
	r := evalrun(t, env, "inspect", "models/stories260K.gguf")
	if r.code != 3 || r.stdout != "" || !strings.Contains(r.stderr, "inspect: "+filepath.Join(dir, "evalrun-plugin-cpu")+": sha256 differs from plugins.sha256") {
		t.Errorf("another sha256 in the lock file: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestToolCommandsEndWithEvalrun: a plugin's command does not outlive
// evalrun however evalrun ends: SIGINT and SIGTERM stop it (exit 3,
// "interrupted"), to evalrun alone or to the process group as a terminal's
// Ctrl-C, SIGKILL takes it along (Linux's parent-death signal).
func TestToolCommandsEndWithEvalrun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	dir := t.TempDir() // a cpu plugin whose command runs until killed
	if err := os.WriteFile(filepath.Join(dir, "evalrun-plugin-cpu"), []byte("#!/bin/sh\necho \"$$ $$\" > \"$TEST_EVALRUN_PIDFILE\"\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sig   syscall.Signal
		group bool
	}{{syscall.SIGINT, false}, {syscall.SIGTERM, false}, {syscall.SIGKILL, false}, {syscall.SIGINT, true}} {
		sig := c.sig
		t.Run(fmt.Sprintf("%v group=%v", sig, c.group), func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids")
			s := start(t, []string{"EVALRUN_PLUGIN_DIR=" + dir, "TEST_EVALRUN_PIDFILE=" + pidFile}, "generate", "--model", "models/stories260K.gguf", "--prompt", "x")
			pid, _ := pids(t, pidFile)
			if c.group {
				syscall.Kill(-s.cmd.Process.Pid, sig) // start made evalrun a group leader
			} else {
				s.cmd.Process.Signal(sig)
			}
			code := s.wait(t, 25*time.Second)
			if sig != syscall.SIGKILL && (code != 3 || !strings.Contains(s.err.String(), "evalrun: evalrun-plugin-cpu generate: interrupted")) {
				t.Errorf("exit %d after %v, want 3 and the interruption named\n%s", code, sig, s.err)
			}
			testkit.WaitGone(t, "the plugin's command", pid, 5*time.Second)
		})
	}
}

// TestQuitAtOnceRemovesTheCommandsFiles: a second SIGTERM (or Ctrl-C) makes
// evalrun quit at once, which kills the command it runs; it first has the
// command remove the temporary file of the write it is in the middle of. A
// second signal within 0.5 s is the first delivered twice (timeout signals
// evalrun and its group): evalrun waits for the command to stop by itself.
func TestQuitAtOnceRemovesTheCommandsFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	plugins := t.TempDir()
	data, err := os.ReadFile(filepath.Join(binDir, "slowwriter"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(plugins, "evalrun-plugin-cpu"), data, 0o755)
	for _, c := range []struct {
		gap  time.Duration
		quit bool
	}{{700 * time.Millisecond, true}, {50 * time.Millisecond, false}} {
		t.Run(fmt.Sprint(c.gap), func(t *testing.T) {
			out, pidFile := t.TempDir(), filepath.Join(t.TempDir(), "pids")
			s := start(t, []string{"EVALRUN_PLUGIN_DIR=" + plugins, "TEST_EVALRUN_PIDFILE=" + pidFile, "TEST_EVALRUN_OUT=" + filepath.Join(out, "model.gguf")}, "generate")
			pid, _ := pids(t, pidFile)
			s.cmd.Process.Signal(syscall.SIGTERM)
			if c.quit { // the gap counted from evalrun's first signal
				for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.err.String(), "stopping (again to quit at once)") && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
			}
			time.Sleep(c.gap)
			s.cmd.Process.Signal(syscall.SIGTERM)
			code := s.wait(t, 10*time.Second)
			if quit := strings.Contains(s.err.String(), "evalrun: interrupted\n"); code != 3 || quit != c.quit || !strings.Contains(s.err.String(), "evalrun: generate: interrupted") {
				t.Errorf("exit %d, quit at once %v; want 3, %v and the command's interruption\n%s", code, quit, c.quit, s.err)
			}
			testkit.WaitGone(t, "the plugin's command", pid, 5*time.Second)
			if left, _ := os.ReadDir(out); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}
