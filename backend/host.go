package backend

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"
)

// ErrKilled is returned by calls on a Client after Kill.
var ErrKilled = errors.New("plugin was killed")

// MTLSEnv turns off go-plugin's automatic mutual TLS between the host and its
// plugins when set to "0" or "off" (for a plugin, e.g. in another language,
// that does not implement it). It is on by default.
const MTLSEnv = "EVALRUN_PLUGIN_MTLS"

// MTLSFromEnv reads MTLSEnv: unset, "1", "on" or "true" is on; "0", "off"
// or "false" off; anything else an error naming the variable.
func MTLSFromEnv() (bool, error) {
	switch m := strings.ToLower(strings.TrimSpace(os.Getenv(MTLSEnv))); m {
	case "", "1", "on", "true":
		return true, nil
	case "0", "off", "false":
		return false, nil
	default:
		return false, fmt.Errorf("$%s=%q: want on or off (1/0, true/false)", MTLSEnv, os.Getenv(MTLSEnv))
	}
}

// LaunchConfig says how to start a plugin.
type LaunchConfig struct {
	Path string   // the plugin binary (see FindPlugin)
	Args []string // extra command-line arguments
	Env  []string // extra environment ("KEY=value"), on top of the host's
	// Logger receives the plugin's log lines (named after the binary; their
	// info lines at debug level, as they repeat what the host reports) and
	// go-plugin's own messages (debug). Nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds the handshake (default 1 minute).
	StartTimeout time.Duration
	// Stderr receives the plugin's raw stderr (its JSON log lines, panics)
	// and anything it prints on stdout or stderr after the handshake.
	Stderr io.Writer
	// Reattach connects to an already running plugin instead of starting
	// Path (go-plugin's reattach; used by in-process tests and debugging).
	Reattach *plugin.ReattachConfig
}

// StderrTailLines is how many of its last stderr lines a crashed plugin's
// error carries.
const StderrTailLines = 20

// crashGrace is how long a failed call waits for the process to be reaped
// before deciding the plugin is merely unreachable rather than dead.
const crashGrace = 2 * time.Second

// killWait bounds how long Kill waits for go-plugin to finish reading the
// plugin's output after the process group was killed: a descendant that left
// the group could keep the pipes open forever.
const killWait = 3 * time.Second

// Client is a running plugin. It implements Backend; per-call timeouts are
// the caller's ctx (a hung call returns context.DeadlineExceeded and the
// plugin can then be killed). Calls on a plugin that died return a
// *CrashError (errors.Is(err, ErrCrashed)).
//
// The plugin runs in a process group of its own: signals sent to the host's
// group (Ctrl-C, kill -TERM -PGID) do not reach it, and Kill ends every
// process it started. On Linux the kernel kills the plugin when the host
// dies; a watchdog (a shell in the plugin's group that waits on a pipe only
// the host holds) then kills the rest of the group, on any Unix.
type Client struct {
	name    string
	pc      *plugin.Client
	backend Backend
	done    <-chan struct{} // closed when the plugin process exits
	proc    *process        // nil when reattached
	pid     int
	tail    *tailBuffer

	// lockedSum is the binary's sha256 when the lock file listed it and
	// the start checked it; nil otherwise.
	lockedSum []byte

	rows *rowRegion // the shared rows region; nil: none

	killed   atomic.Bool
	killOnce sync.Once
	release  chan struct{} // frees the OS thread that started the plugin
}

var _ Backend = (*Client)(nil)

// Launch starts the plugin at cfg.Path (or reattaches), performs the
// handshake and returns the connected Client. ctx bounds the start. When the
// plugin's directory holds a plugins.sha256 lock file, the binary's sha256
// must be the one it lists (go-plugin's SecureConfig).
func Launch(ctx context.Context, cfg LaunchConfig) (*Client, error) {
	if cfg.Path == "" && cfg.Reattach == nil {
		return nil, errors.New("launch plugin: no path given")
	}
	closeRowsFile := func() {}
	logger := hclog.NewNullLogger()
	if cfg.Logger != nil {
		logger = slogBridge(cfg.Logger)
	}
	c := &Client{
		name:    filepath.Base(cfg.Path),
		tail:    newTailBuffer(StderrTailLines),
		release: make(chan struct{}),
	}
	stderr := cfg.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	glue := &Plugin{}
	plugins := plugin.PluginSet{PluginName: glue}
	pcfg := &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: plugins},
		Plugins:          plugins, // reattaching skips version negotiation
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// Replies are bounded as the plugin bounds requests (go-plugin's
		// default, 2 GiB, would let a plugin make the host allocate that).
		GRPCDialOptions: []grpc.DialOption{experimental.WithBufferPool(rowPool),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize))},
		StartTimeout: cfg.StartTimeout,
		Logger:       logger,
		// Each source gets its own line splitter so interleaved writes
		// cannot merge half lines in the tail.
		Stderr:     io.MultiWriter(stderr, c.tail.source()),
		SyncStdout: io.MultiWriter(stderr, c.tail.source()),
		SyncStderr: io.MultiWriter(stderr, c.tail.source()),
	}
	if cfg.Reattach != nil {
		pcfg.Reattach = cfg.Reattach
		c.pid = cfg.Reattach.Pid
		if c.name == "." {
			c.name = "reattached plugin"
		}
	} else {
		if st, err := os.Stat(cfg.Path); err != nil {
			return nil, fmt.Errorf("launch plugin: %w", err)
		} else if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("launch plugin: %s is not a regular file", cfg.Path)
		}
		sum, err := lockedChecksum(cfg.Path)
		if err != nil {
			return nil, fmt.Errorf("launch plugin: %w", err)
		}
		if pcfg.AutoMTLS, err = MTLSFromEnv(); err != nil {
			return nil, fmt.Errorf("launch plugin: %w", err)
		}
		shared, err := SharedRowsFromEnv()
		if err != nil {
			return nil, fmt.Errorf("launch plugin: %w", err)
		}
		var rowsFile *os.File // the plugin's end of the region, closed once it started
		closeRowsFile = sync.OnceFunc(func() {
			if rowsFile != nil {
				rowsFile.Close()
			}
		})
		if shared {
			// Without it (not Linux, or memfd refused) rows move in the
			// messages, as they do for a plugin that does not map it.
			if glue.rows, rowsFile, err = newHostRows(); err != nil && cfg.Logger != nil {
				cfg.Logger.Debug("shared memory rows unavailable", "plugin", c.name, "error", err)
			}
			c.rows = glue.rows
		}
		pcfg.SkipHostEnv = true
		// go-plugin creates a private socket directory for a RunnerFunc and
		// removes it on Kill (the watchdog does if the host dies), so no
		// socket outlives its plugin. spec carries go-plugin's variables.
		pcfg.RunnerFunc = func(_ hclog.Logger, spec *exec.Cmd, socketDir string) (pluginRunner, error) {
			socketDirs.Store(socketDir, true)
			if sum != nil {
				// go-plugin's SecureConfig, checked here: with a RunnerFunc
				// go-plugin has no path of its own to check.
				if err := checkSum(cfg.Path, sum); err != nil {
					// go-plugin removes socketDir only once a runner exists.
					os.RemoveAll(socketDir)
					closeRowsFile()
					return nil, err
				}
				c.lockedSum = sum
			}
			cmd := exec.Command(cfg.Path, cfg.Args...)
			// The host environment first so cfg.Env wins (exec keeps the
			// last duplicate), then go-plugin's handshake variables.
			cmd.Env = append(append(os.Environ(), cfg.Env...), spec.Env...)
			cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", HostPIDEnv, os.Getpid()))
			if rowsFile != nil {
				cmd.ExtraFiles = []*os.File{rowsFile} // fd 3
				cmd.Env = append(cmd.Env, RowsFDEnv+"=3")
			} else {
				cmd.Env = append(cmd.Env, RowsFDEnv+"=") // none, whatever the host's environment says
			}
			c.proc = newProcess(cmd, socketDir)
			c.proc.afterStart = closeRowsFile
			return c.proc, nil
		}
	}
	c.pc = plugin.NewClient(pcfg)

	type started struct {
		raw any
		err error
	}
	result := make(chan started, 1)
	go func() {
		// Pdeathsig fires when the thread that forked the plugin exits, and Go
		// ends threads whose goroutine exits locked; keep this one locked and
		// alive until the plugin is gone so the signal means "host died".
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		rpc, err := c.pc.Client()
		if err != nil {
			result <- started{err: err}
			return
		}
		raw, err := rpc.Dispense(PluginName)
		result <- started{raw: raw, err: err}
		if err != nil {
			return
		}
		d, _ := raw.(*dispensed)
		if d == nil {
			return
		}
		select {
		case <-d.done:
		case <-c.release:
		}
	}()

	var r started
	select {
	case r = <-result:
	case <-ctx.Done():
		// Kill once the start has settled: killing earlier would miss a
		// process that is still being started.
		go func() {
			<-result
			closeRowsFile() // the start has settled: the host's copy of the descriptor is not needed
			c.Kill()
		}()
		return nil, fmt.Errorf("launch plugin %s: %w", c.name, ctx.Err())
	}
	closeRowsFile() // the start has settled: the host's copy of the descriptor is not needed
	if r.err != nil {
		c.Kill()
		return nil, fmt.Errorf("launch plugin %s: %w%s", c.name, r.err, c.tail.suffix())
	}
	d, ok := r.raw.(*dispensed)
	if !ok {
		c.Kill()
		return nil, fmt.Errorf("launch plugin %s: unexpected client type %T", c.name, r.raw)
	}
	c.backend, c.done = d.Backend, d.done
	if c.proc != nil {
		c.pid = c.proc.pid()
	}
	return c, nil
}

// SharedRows counts the logits rows that came through shared memory rather
// than in gRPC messages (0: the plugin's rows all came in messages).
func (c *Client) SharedRows() int64 {
	if g, ok := c.backend.(*grpcClient); ok && g.leases != nil {
		return g.leases.taken.Load()
	}
	return 0
}

// Pid is the plugin's process id.
func (c *Client) Pid() int { return c.pid }

// LockedSHA256 is the binary's sha256 in hex when the plugins.sha256 lock
// file listed it (Launch then checked the binary against it), "" otherwise.
func (c *Client) LockedSHA256() string { return hex.EncodeToString(c.lockedSum) }

// Exited reports whether the plugin process has ended (crashed or killed).
func (c *Client) Exited() bool { return c.pc.Exited() }

// ExitCode is the plugin's exit code, or -1 while it runs, when it was
// killed by a signal, or when it was reattached.
func (c *Client) ExitCode() int {
	if ps := c.processState(); ps != nil {
		return ps.ExitCode()
	}
	return -1
}

// ExitErr describes how the plugin ended ("exit status 3", "signal:
// killed"); nil while it runs, after a clean exit, or when reattached.
func (c *Client) ExitErr() error {
	ps := c.processState()
	if ps == nil || ps.Success() {
		return nil
	}
	return errors.New(ps.String())
}

func (c *Client) processState() *os.ProcessState {
	// go-plugin reaps the process and then marks it exited under its lock,
	// so once Exited is true ProcessState is written and safe to read.
	if c.proc == nil || !c.pc.Exited() {
		return nil
	}
	return c.proc.cmd.ProcessState
}

// PeakRSS is the plugin process's peak resident set size so far (Linux:
// VmHWM of /proc/PID/status); ok is false on other systems, for a
// reattached plugin, or once the process is gone.
func (c *Client) PeakRSS() (bytes int64, ok bool) {
	if c.proc == nil || c.pc.Exited() {
		return 0, false
	}
	return peakRSS(c.pid)
}

// StderrTail returns the last lines the plugin wrote to stderr (or stdout).
func (c *Client) StderrTail() []string { return c.tail.lines() }

// Kill ends the plugin and every process it started (SIGKILL to its process
// group; the caller asks a plugin to release its resources with Close
// first). It returns within a few seconds even if a descendant that left the
// group holds the plugin's output open, and may be called more than once.
func (c *Client) Kill() {
	c.killOnce.Do(func() {
		c.killed.Store(true)
		if c.proc != nil {
			c.proc.killGroup()
		}
		done := make(chan struct{})
		go func() {
			c.pc.Kill() // removes the socket directory
			if c.proc != nil {
				socketDirs.Delete(c.proc.socketDir)
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(killWait):
		}
		c.rows.close() // after any copy out of it (a stream still reading gets an error)
		close(c.release)
	})
}

// Describe implements Backend.
func (c *Client) Describe(ctx context.Context) (Info, error) {
	if err := c.usable("Describe"); err != nil {
		return Info{}, err
	}
	info, err := c.backend.Describe(ctx)
	return info, c.callErr(ctx, "Describe", err)
}

// Load implements Backend.
func (c *Client) Load(ctx context.Context, req LoadRequest) (LoadResult, error) {
	if err := c.usable("Load"); err != nil {
		return LoadResult{}, err
	}
	res, err := c.backend.Load(ctx, req)
	return res, c.callErr(ctx, "Load", err)
}

// Validate implements Validator; a plugin without it gives ErrUnsupported.
func (c *Client) Validate(ctx context.Context, req LoadRequest) ([]string, error) {
	if err := c.usable("Validate"); err != nil {
		return nil, err
	}
	v, ok := c.backend.(Validator)
	if !ok {
		return nil, Errorf(ErrUnsupported, "%s: Validate: not supported", c.name)
	}
	warnings, err := v.Validate(ctx, req)
	return warnings, c.callErr(ctx, "Validate", err)
}

// Eval implements Backend. An error returned by emit ends the call and is
// returned as is.
func (c *Client) Eval(ctx context.Context, req EvalRequest, emit func(Logits) error) error {
	return c.EvalInto(ctx, req, nil, emit)
}

// EvalInto is Eval that decodes every row straight into buf(n), a slice of
// n float32 the caller owns (nil buf: freshly allocated rows). A host that
// recycles its rows receives a vocabulary of logits with one copy and no
// allocation per row.
func (c *Client) EvalInto(ctx context.Context, req EvalRequest, buf func(n int) []float32, emit func(Logits) error) error {
	if err := c.usable("Eval"); err != nil {
		return err
	}
	var emitErr error
	wrapped := func(l Logits) error {
		emitErr = emit(l)
		return emitErr
	}
	var err error
	if rd, ok := c.backend.(RowDecoder); ok {
		err = rd.EvalInto(ctx, req, buf, wrapped)
	} else {
		err = c.backend.Eval(ctx, req, wrapped)
	}
	if err != nil && err == emitErr {
		return err
	}
	return c.callErr(ctx, "Eval", err)
}

// RowDecoder is implemented by the host's gRPC client (and Client): Eval
// with rows decoded into the caller's buffers.
type RowDecoder interface {
	EvalInto(ctx context.Context, req EvalRequest, buf func(n int) []float32, emit func(Logits) error) error
}

// Bench implements Backend.
func (c *Client) Bench(ctx context.Context, req BenchRequest) (BenchResult, error) {
	if err := c.usable("Bench"); err != nil {
		return BenchResult{}, err
	}
	res, err := c.backend.Bench(ctx, req)
	if err != nil {
		return res, c.callErr(ctx, "Bench", err)
	}
	if res.NDepth != req.NDepth {
		// A plugin built before n_depth ignores it and measures at depth 0.
		return BenchResult{}, Errorf(ErrUnsupported, "%s: Bench: asked for n_depth %d, the plugin measured at %d (does it predate n_depth?)", c.name, req.NDepth, res.NDepth)
	}
	return res, nil
}

// Diagnostics implements Diagnoser: nil when the plugin has no diagnostics.
func (c *Client) Diagnostics(ctx context.Context) (*Diagnostics, error) {
	if err := c.usable("Diagnostics"); err != nil {
		return nil, err
	}
	d, ok := c.backend.(Diagnoser)
	if !ok {
		return nil, nil
	}
	res, err := d.Diagnostics(ctx)
	return res, c.callErr(ctx, "Diagnostics", err)
}

// Close implements Backend: it releases the model; the process keeps
// running until Kill.
func (c *Client) Close(ctx context.Context) error {
	if err := c.usable("Close"); err != nil {
		return err
	}
	return c.callErr(ctx, "Close", c.backend.Close(ctx))
}

// usable fails fast on a plugin that is already gone.
func (c *Client) usable(op string) error {
	if c.killed.Load() {
		return fmt.Errorf("%s: %s: %w", c.name, op, ErrKilled)
	}
	select {
	case <-c.done:
		return c.crashError(op, nil)
	default:
		return nil
	}
}

// callErr classifies a failed call: the caller's deadline, a crash, or the
// plugin's own error (returned unchanged, so its kind and text survive).
func (c *Client) callErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return fmt.Errorf("%s: %s: %w", c.name, op, ctx.Err())
	}
	if c.killed.Load() {
		return fmt.Errorf("%s: %s: %w", c.name, op, ErrKilled)
	}
	// A dead plugin shows up as a transport error; give the reaper a
	// moment so the exit status and the last stderr lines are known.
	if code := status.Code(err); code == codes.Unavailable || code == codes.Internal || code == codes.Canceled {
		select {
		case <-c.done:
			return c.crashError(op, err)
		case <-time.After(crashGrace):
		}
	}
	select {
	case <-c.done:
		return c.crashError(op, err)
	default:
		return err
	}
}

func (c *Client) crashError(op string, cause error) error {
	e := &CrashError{Plugin: c.name, Pid: c.pid, Op: op, ExitCode: c.ExitCode(), Stderr: c.tail.lines(), Cause: cause}
	if ps := c.processState(); ps != nil {
		e.Status = ps.String()
	}
	return e
}

// CrashError reports a plugin process that died. errors.Is(err, ErrCrashed).
type CrashError struct {
	Plugin   string
	Pid      int
	Op       string   // the call that found it dead
	ExitCode int      // -1 if unknown or killed by a signal
	Status   string   // e.g. "exit status 3", "signal: segmentation fault"
	Stderr   []string // its last stderr lines
	Cause    error    // the transport error, if any
}

func (e *CrashError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %s (pid %d) crashed during %s", e.Plugin, e.Pid, e.Op)
	if e.Status != "" {
		fmt.Fprintf(&b, ": %s", e.Status)
	}
	if len(e.Stderr) > 0 {
		b.WriteString("; last stderr lines:")
		for _, l := range e.Stderr {
			b.WriteString("\n  ")
			b.WriteString(l)
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrCrashed) true.
func (e *CrashError) Is(target error) bool { return target == ErrCrashed }

// Unwrap returns the transport error.
func (e *CrashError) Unwrap() error { return e.Cause }
