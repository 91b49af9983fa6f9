package backend_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/testkit"
)

// testPlugin is the binary of ./testdata/testplugin, built once in TestMain.
var testPlugin string

func TestMain(m *testing.M) {
	if path := os.Getenv(hostEnv); path != "" {
		standInHost(path)
	}
	name := backend.PluginPrefix + "test"
	testkit.Main(m, map[string]string{name: "./backend/testdata/testplugin"}, func(dir string) { testPlugin = filepath.Join(dir, name) })
}

func writeFile(path string, mode os.FileMode) error {
	return os.WriteFile(path, []byte("#!/bin/sh\n"), mode)
}

func launch(t *testing.T, stderr *testkit.SyncBuffer) *backend.Client {
	t.Helper()
	cfg := backend.LaunchConfig{Path: testPlugin, StartTimeout: 20 * time.Second}
	if stderr != nil {
		cfg.Stderr = stderr
	}
	c, err := backend.Launch(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(c.Kill)
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m"}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestPluginPrintingDuringLoadStillWorks(t *testing.T) {
	var stderr testkit.SyncBuffer
	c := launch(t, &stderr)
	ctx := context.Background()
	if c.Pid() <= 0 || c.Pid() == os.Getpid() {
		t.Errorf("Pid() = %d, want the plugin's own pid", c.Pid())
	}
	if _, err := c.Load(ctx, backend.LoadRequest{ModelPath: "m", Options: map[string]any{"print": true}}); err != nil {
		t.Fatalf("Load with printing: %v", err)
	}
	rows, err := collect(t, c, backend.EvalRequest{Session: "s", Pos: 0, Tokens: []int32{7, 8}})
	if err != nil || len(rows) != 2 || rows[1].Pos != 1 {
		t.Fatalf("Eval after printing: %d rows, err %v", len(rows), err)
	}
	// Output after the handshake is forwarded (stdio streams arrive
	// asynchronously, hence the wait) and the JSON log line gets through.
	deadline := time.Now().Add(5 * time.Second)
	for _, want := range []string{"stray line on stdout during Load", "stray line on stderr during Load", `"@message":"loading"`} {
		for !strings.Contains(stderr.String(), want) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("plugin output lacks %q; got:\n%s", want, stderr.String())
		}
	}
}

func TestCrashMidEvalIsReported(t *testing.T) {
	c := launch(t, nil)
	start := time.Now()
	var rows int
	err := c.Eval(context.Background(), backend.EvalRequest{Session: "crash", Pos: 0, Tokens: []int32{1, 2, 3}}, func(backend.Logits) error {
		rows++
		return nil
	})
	elapsed := time.Since(start)
	if !errors.Is(err, backend.ErrCrashed) {
		t.Fatalf("Eval on a crashing plugin: err = %v, want ErrCrashed", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("crash took %v to report", elapsed)
	}
	if rows > 1 {
		// Row 0 may or may not reach the host before the exit.
		t.Errorf("got %d rows before the crash, want at most 1", rows)
	}
	if !c.Exited() {
		t.Error("Exited() = false after a crash")
	}
	if c.ExitCode() != 3 {
		t.Errorf("ExitCode() = %d, want 3", c.ExitCode())
	}
	var ce *backend.CrashError
	if !errors.As(err, &ce) || ce.ExitCode != 3 || ce.Op != "Eval" {
		t.Fatalf("err = %#v, want a *CrashError for Eval with exit code 3", err)
	}
	msg := err.Error()
	for _, want := range []string{"exit status 3", "about to exit mid-eval", backend.PluginPrefix + "test"} {
		if !strings.Contains(msg, want) {
			t.Errorf("crash message lacks %q:\n%s", want, msg)
		}
	}
	// Later calls fail fast with the same diagnosis.
	if _, err := c.Describe(context.Background()); !errors.Is(err, backend.ErrCrashed) {
		t.Errorf("Describe after crash: err = %v, want ErrCrashed", err)
	}
}

func TestPanicMidEvalShowsTheStack(t *testing.T) {
	c := launch(t, nil)
	err := c.Eval(context.Background(), backend.EvalRequest{Session: "panic", Pos: 0, Tokens: []int32{1, 2}}, func(backend.Logits) error { return nil })
	if !errors.Is(err, backend.ErrCrashed) {
		t.Fatalf("Eval on a panicking plugin: err = %v, want ErrCrashed", err)
	}
	if c.ExitCode() != 2 || !strings.Contains(err.Error(), "test panic at row 1") {
		t.Errorf("exit code %d, message:\n%v\nwant exit code 2 and the panic text", c.ExitCode(), err)
	}
}

func TestHungPluginHitsDeadlineAndCanBeKilled(t *testing.T) {
	c := launch(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Eval(ctx, backend.EvalRequest{Session: "hang", Pos: 0, Tokens: []int32{1, 2}}, func(backend.Logits) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Eval on a hung plugin: err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Eval returned after %v, want about the 300ms deadline", d)
	}
	if c.Exited() {
		t.Fatal("plugin exited by itself")
	}
	start = time.Now()
	c.Kill()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Kill took %v", d)
	}
	if !c.Exited() {
		t.Error("Exited() = false after Kill")
	}
	if _, err := c.Describe(context.Background()); !errors.Is(err, backend.ErrKilled) {
		t.Errorf("Describe after Kill: err = %v, want ErrKilled", err)
	}
}

func TestPluginExitsWhenHostDies(t *testing.T) {
	// A stand-in host: a shell that starts the plugin in the background and
	// is then SIGKILLed. The plugin's parent watchdog must notice.
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The shell tells the plugin its pid, as Launch does: killed before the
	// plugin is up (a loaded machine), it must still be noticed.
	host := exec.Command("sh", "-c", ``+backend.HostPIDEnv+`=$$ "$0" > /dev/null 2>&1 & echo $! > "$1"; wait`, testPlugin, pidFile)
	host.Env = append(os.Environ(), backend.Handshake.MagicCookieKey+"="+backend.Handshake.MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS=1", "PLUGIN_MIN_PORT=10000", "PLUGIN_MAX_PORT=25000")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			fmt.Sscan(string(b), &pid)
			break
		}
	}
	if pid == 0 {
		host.Process.Kill()
		t.Fatal("stand-in host did not report the plugin's pid")
	}
	host.Process.Kill()
	host.Wait()
	// The watchdog checks every 0.5 s; the bound is for a machine loaded
	// with other work, where the plugin may still be starting.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !testkit.Alive(pid) {
			return
		}
	}
	exec.Command("kill", "-9", fmt.Sprint(pid)).Run()
	t.Errorf("plugin pid %d still running 30 s after its host was killed", pid)
}
