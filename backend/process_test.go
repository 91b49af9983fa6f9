package backend_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/internal/testkit"
)

// forkingPlugin writes a plugin script that starts a child holding the
// plugin's stdout and stderr open, writes the child's pid to a file, and
// then becomes the real test plugin (or, with exec "", stops there after
// printing a line that is no handshake).
func forkingPlugin(t *testing.T, execPlugin bool) (script, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "child.pid")
	body := fmt.Sprintf("#!/bin/sh\nsleep 1000 &\necho $! > %q\n", pidFile)
	if execPlugin {
		body += fmt.Sprintf("exec %q \"$@\"\n", testPlugin)
	} else {
		body += "echo hello\nsleep 1000\n"
	}
	script = filepath.Join(dir, backend.PluginPrefix+"script")
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, pidFile
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no pid in %s", file)
	return 0
}

func TestKillEndsTheChildrenAPluginStarted(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where go-plugin puts the socket directory
	script, pidFile := forkingPlugin(t, true)
	c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: script, StartTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	child := readPid(t, pidFile)
	if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m"}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
		t.Errorf("TMPDIR holds %d entries while the plugin runs, want its socket directory", len(entries))
	}
	start := time.Now()
	c.Kill()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Kill took %v with a child holding the plugin's output open", d)
	}
	testkit.WaitGone(t, "the plugin's child", child, 5*time.Second)
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("after Kill TMPDIR still holds %v (socket directories must not accumulate)", entries)
	}
}

func TestPluginPrintingNoHandshakeFailsFast(t *testing.T) {
	script, pidFile := forkingPlugin(t, false)
	start := time.Now()
	_, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: script, StartTimeout: 20 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "hello") {
		t.Fatalf("Launch: err = %v, want the unrecognized line in it", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("Launch failed only after %v", d)
	}
	testkit.WaitGone(t, "the script's sleep", readPid(t, pidFile), 5*time.Second)
}

func TestLockFileChecksums(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, backend.PluginPrefix+"test")
	data, err := os.ReadFile(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	lock := func(text string) {
		if err := os.WriteFile(filepath.Join(dir, backend.LockFile), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	launch := func() error {
		// VerifyLocked (a plugin's own commands) must agree with Launch.
		verr := backend.VerifyLocked(bin)
		c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: bin, StartTimeout: 20 * time.Second})
		if err == nil {
			c.Kill()
		}
		if (err == nil) != (verr == nil) {
			t.Errorf("Launch: %v, but VerifyLocked: %v", err, verr)
		}
		return err
	}
	if err := launch(); err != nil {
		t.Fatalf("no lock file: %v", err)
	}
	lock(hex.EncodeToString(sum[:]) + "  " + filepath.Base(bin) + "\n")
	if err := launch(); err != nil {
		t.Fatalf("listed with the right checksum: %v", err)
	}
	sum[0] ^= 1
	lock(hex.EncodeToString(sum[:]) + " *" + filepath.Base(bin) + "\n")
	if err := launch(); err == nil || !strings.Contains(err.Error(), "sha256 differs") {
		t.Errorf("wrong checksum: err = %v", err)
	}
	lock(hex.EncodeToString(sum[:]) + "  evalrun-plugin-other\n")
	if err := launch(); err == nil || !strings.Contains(err.Error(), "not listed in") {
		t.Errorf("not listed: err = %v", err)
	}
	lock("nonsense\n")
	if err := launch(); err == nil || !strings.Contains(err.Error(), backend.LockFile+":1") {
		t.Errorf("malformed lock file: err = %v", err)
	}
}

// hostEnv makes the test binary a stand-in host (see TestMain): it launches
// the plugin named by the variable and waits to be killed.
const hostEnv = "TEST_EVALRUN_STANDIN_HOST"

func standInHost(path string) {
	c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: path, StartTimeout: 20 * time.Second})
	if err != nil {
		fmt.Println("launch:", err)
		os.Exit(1)
	}
	fmt.Println(c.Pid())
	select {}
}

// startStandInHost starts this test binary as a host of the plugin at
// script and returns it with the plugin's pid.
func startStandInHost(t *testing.T, script string) (host *exec.Cmd, pluginPid int) {
	t.Helper()
	host = exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), hostEnv+"="+script)
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fscan(out, &pluginPid); err != nil {
		host.Process.Kill()
		t.Fatalf("stand-in host: %v", err)
	}
	return host, pluginPid
}

func TestPluginTreeEndsWhenTheHostIsKilled(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			script, pidFile := forkingPlugin(t, true)
			host, pluginPid := startStandInHost(t, script)
			child := readPid(t, pidFile)
			host.Process.Signal(sig)
			host.Wait()
			testkit.WaitGone(t, "the plugin", pluginPid, 5*time.Second)
			testkit.WaitGone(t, "the plugin's child", child, 5*time.Second)
		})
	}
}

// A normal shutdown (Kill after the work is done) is silent; a plugin that
// dies by itself is still go-plugin's "plugin process exited" at error level.
func TestOnlyAnUnexpectedExitIsLoggedAsAnError(t *testing.T) {
	logged := func(session string) string {
		var log testkit.SyncBuffer
		c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: testPlugin, StartTimeout: 20 * time.Second,
			Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatalf("Launch: %v", err)
		}
		if _, err := c.Load(context.Background(), backend.LoadRequest{ModelPath: "m"}); err != nil {
			t.Fatalf("Load: %v", err)
		}
		_ = c.Eval(context.Background(), backend.EvalRequest{Session: session, Pos: 0, Tokens: []int32{1, 2, 3}}, func(backend.Logits) error { return nil })
		c.Kill()
		return log.String()
	}
	if out := logged("s"); strings.Contains(out, "level=ERROR") || !strings.Contains(out, `level=DEBUG msg="plugin process exited"`) {
		t.Errorf("a normal Kill logged:\n%s\nwant the exit at debug level, no error", out)
	}
	if out := logged("crash"); !strings.Contains(out, `level=ERROR msg="plugin process exited"`) {
		t.Errorf("a crash logged:\n%s\nwant plugin process exited at error level", out)
	}
}
