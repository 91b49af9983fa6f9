package backend

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
)

type pluginRunner = runner.Runner

// process runs one plugin for go-plugin (a runner.Runner): the plugin in a
// process group of its own, with a watchdog that ends the group if the host
// dies without doing it.
type process struct {
	cmd            *exec.Cmd
	socketDir      string
	stdout, stderr io.ReadCloser // set by Start
	stopWatchdog   func()
	afterStart     func() // nil: nothing to do once the plugin started
	killOnce       sync.Once
	killed         atomic.Bool // the host ended the plugin: its exit is no error
}

func newProcess(cmd *exec.Cmd, socketDir string) *process {
	ownProcessGroup(cmd)
	return &process{cmd: cmd, socketDir: socketDir, stopWatchdog: func() {}}
}

func (p *process) Start(context.Context) error {
	var err error
	if p.stdout, err = p.cmd.StdoutPipe(); err != nil {
		return err
	}
	if p.stderr, err = p.cmd.StderrPipe(); err != nil {
		return err
	}
	becomeSubreaper()
	err = p.cmd.Start()
	if p.afterStart != nil {
		p.afterStart()
	}
	if err != nil {
		return err
	}
	launched.Store(p.cmd.Process.Pid, true)
	p.stopWatchdog = startWatchdog(p.cmd.Process.Pid, p.socketDir)
	return nil
}

// launched holds the pids of the processes Launch started and has not yet
// reaped (plugins, their watchdogs): EndOrphans leaves them to their Wait.
var launched sync.Map

// EndOrphans kills and reaps what is left of the plugins' process trees
// once they are stopped: on Linux the host is its plugins' child subreaper,
// so a process a plugin detached from its group (setsid) and left behind
// when it died is the host's child, found and ended here. The host calls it
// when a run's plugins are closed. Elsewhere it does nothing.
func EndOrphans() {
	endOrphans(func(pid int) bool { _, ok := launched.Load(pid); return ok })
}

func (p *process) pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// killGroup SIGKILLs the plugin's process group (the plugin and whatever it
// started) and releases the watchdog. The group leader is not reaped before
// its output is drained (go-plugin waits for that), so its pid, which is the
// group's id, cannot have been reused.
func (p *process) killGroup() {
	p.killOnce.Do(func() {
		p.killed.Store(true)
		if pid := p.pid(); pid > 0 {
			killTree(pid) // descendants that left the group (Linux)
			killProcessGroup(pid)
		}
		p.stopWatchdog()
	})
}

// Wait reports how the plugin ended. go-plugin logs a non-nil error as
// "[ERROR] plugin process exited": a plugin that ended by the signal the host
// sent it (every normal shutdown) ended as asked, so only an exit the host
// did not cause is an error. The status stays in cmd.ProcessState.
func (p *process) Wait(context.Context) error {
	err := p.cmd.Wait()
	launched.Delete(p.pid())
	if ps := p.cmd.ProcessState; p.killed.Load() && ps != nil && ps.ExitCode() == -1 {
		return nil
	}
	return err
}

func (p *process) Kill(context.Context) error { p.killGroup(); return nil }
func (p *process) Stdout() io.ReadCloser      { return p.stdout }
func (p *process) Stderr() io.ReadCloser      { return p.stderr }
func (p *process) Name() string               { return p.cmd.Path }
func (p *process) ID() string                 { return strconv.Itoa(p.pid()) }

func (p *process) Diagnose(context.Context) string { return "" }

func (p *process) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (p *process) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// errChecksum says why a checksum check failed.
func errChecksum(err error) error {
	if err != nil {
		return err
	}
	return plugin.ErrChecksumsDoNotMatch
}

// PluginPrefix starts the file name of every plugin binary.
const PluginPrefix = "evalrun-plugin-"

// LockFile is the name of the checksum file beside plugin binaries (make
// build writes it in sha256sum's format). When present, Launch refuses a
// binary it does not list or whose sha256 differs.
const LockFile = "plugins.sha256"

// ErrPluginNotFound marks FindPlugin's failures (no such plugin, not an
// executable): bad input, not a backend that failed.
var ErrPluginNotFound = errors.New("plugin not found")

// FindPlugin returns the executable for ref: a plugin name is the binary
// evalrun-plugin-NAME, searched in dirs in order and then in the directory of
// the running executable; a ref containing a path separator is a path, used
// as is. Whether a path may be given at all is the caller's decision (a spec
// says plugin_path for it). The result is absolute.
func FindPlugin(ref string, dirs ...string) (string, error) {
	if strings.ContainsAny(ref, `/\`) {
		return checkExecutable(ref)
	}
	if ref == "" || ref == "." || ref == ".." {
		return "", Errorf(ErrPluginNotFound, "find plugin: invalid name %q", ref)
	}
	file := PluginPrefix + ref
	if runtime.GOOS == "windows" {
		file += ".exe"
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dirs = append(dirs[:len(dirs):len(dirs)], filepath.Dir(exe))
	}
	var looked []string
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		looked = append(looked, dir)
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return checkExecutable(p)
		}
	}
	return "", Errorf(ErrPluginNotFound, "find plugin %q: no %s in %s", ref, file, strings.Join(looked, ", "))
}

func checkExecutable(p string) (string, error) {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", Errorf(ErrPluginNotFound, "plugin %s: no such file", p)
	case err != nil:
		return "", Errorf(ErrPluginNotFound, "plugin %v", err)
	case !st.Mode().IsRegular():
		return "", Errorf(ErrPluginNotFound, "plugin %s: not a regular file", p)
	case runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0:
		return "", Errorf(ErrPluginNotFound, "plugin %s: is not executable", p)
	}
	return filepath.Abs(p)
}

// lockedChecksum is the sha256 the lock file beside path lists for it, nil
// when there is no lock file.
func lockedChecksum(path string) ([]byte, error) {
	lock := filepath.Join(filepath.Dir(path), LockFile)
	f, err := os.Open(lock)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	name := filepath.Base(path)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		sum, file, ok := strings.Cut(text, " ")
		file = strings.TrimPrefix(strings.TrimSpace(file), "*")
		b, err := hex.DecodeString(sum)
		if !ok || err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("%s:%d: want \"SHA256  FILE\" (sha256sum's format)", lock, line)
		}
		if file == name {
			return b, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s is not listed in %s (rebuild with make build, or remove the lock file)", name, lock)
}

// VerifyLocked checks the binary at path against the lock file beside it,
// as Launch does before it starts a plugin; no lock file, no check. It is
// for running a plugin binary's own commands (evalrun generate, kernels).
func VerifyLocked(path string) error {
	sum, err := lockedChecksum(path)
	if err != nil || sum == nil {
		return err
	}
	return checkSum(path, sum)
}

// checkSum is go-plugin's SecureConfig check of the binary at path.
func checkSum(path string, sum []byte) error {
	if ok, err := newSecureConfig(sum).Check(path); err != nil || !ok {
		return fmt.Errorf("%s: sha256 differs from %s (rebuild with make build, or update or remove the lock file): %w", path, LockFile, errChecksum(err))
	}
	return nil
}

func newSecureConfig(sum []byte) *plugin.SecureConfig {
	return &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
}
