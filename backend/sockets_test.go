package backend_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evalrun/evalrun/backend"
)

// leftInTmp fails t unless dir (the TMPDIR go-plugin made its socket
// directory in) is empty within limit.
func leftInTmp(t *testing.T, dir string, limit time.Duration) {
	t.Helper()
	var entries []os.DirEntry
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		entries, _ = os.ReadDir(dir)
		if len(entries) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	t.Errorf("TMPDIR still holds %v %v later: a plugin's socket directory outlived it", names, limit)
}

// TestNoSocketDirOutlivesItsPlugin: however a plugin ends (a crash, a
// timeout, the lock file refusing it, a handshake it never gives, its host
// SIGKILLed) no socket directory is left behind in TMPDIR. (A plain Kill
// after the work is TestKillEndsTheChildrenAPluginStarted.)
func TestNoSocketDirOutlivesItsPlugin(t *testing.T) {
	ended := map[string]func(t *testing.T){
		"crash": func(t *testing.T) {
			c := launch(t, nil)
			err := c.Eval(context.Background(), backend.EvalRequest{Session: "crash", Tokens: []int32{1, 2, 3}}, func(backend.Logits) error { return nil })
			if !errors.Is(err, backend.ErrCrashed) {
				t.Fatalf("Eval: %v, want a crash", err)
			}
			c.Kill()
		},
		"timeout": func(t *testing.T) {
			c := launch(t, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := c.Eval(ctx, backend.EvalRequest{Session: "hang", Tokens: []int32{1, 2}}, func(backend.Logits) error { return nil })
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Eval: %v, want the deadline", err)
			}
			c.Kill()
		},
		"refused by the lock file": func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, backend.PluginPrefix+"test")
			data, err := os.ReadFile(testPlugin)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(bin, data, 0o755)
			sum := sha256.Sum256(append(data, 0))
			os.WriteFile(filepath.Join(dir, backend.LockFile), []byte(hex.EncodeToString(sum[:])+"  "+filepath.Base(bin)+"\n"), 0o644)
			if c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: bin, StartTimeout: 20 * time.Second}); err == nil {
				c.Kill()
				t.Fatal("a plugin whose sha256 differs from the lock file was started")
			}
		},
		"no handshake": func(t *testing.T) {
			script, pidFile := forkingPlugin(t, false)
			if c, err := backend.Launch(context.Background(), backend.LaunchConfig{Path: script, StartTimeout: 20 * time.Second}); err == nil {
				c.Kill()
				t.Fatal("a plugin without a handshake was started")
			}
			readPid(t, pidFile)
		},
		"host SIGKILLed": func(t *testing.T) {
			script, _ := forkingPlugin(t, true)
			host, _ := startStandInHost(t, script)
			host.Process.Kill()
			host.Wait()
		},
	}
	for name, end := range ended {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp) // where go-plugin makes the socket directory
			end(t)
			leftInTmp(t, tmp, 5*time.Second)
		})
	}
}
