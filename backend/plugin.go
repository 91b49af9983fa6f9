package backend

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
)

// Handshake is the go-plugin handshake shared by the host and every plugin.
// The cookie only stops a plugin binary from being run by hand by mistake; it
// is not a security measure.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "EVALRUN_PLUGIN",
	MagicCookieValue: "9f1c3e0b7a5d4c2e8b6f0a1d3c5e7f90",
}

// PluginName is the name the Backend service is dispensed under.
const PluginName = "backend"

// MaxMessageSize is the receive limit of the plugin's gRPC server and of
// the host's client. gRPC's default of 4 MiB is too small for long token
// requests and chunks of logits rows.
const MaxMessageSize = 256 << 20

// LogLevelEnv names the environment variable that sets a plugin's log level
// (trace, debug, info, warn, error; default info).
const LogLevelEnv = "EVALRUN_PLUGIN_LOG_LEVEL"

// Plugin is the go-plugin glue for the Backend service. Plugin mains pass an
// Impl through Serve; the host uses the zero value.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Backend
	rows *rowRegion // the shared rows region (either side); nil: none
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers Impl on the plugin's gRPC server.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	newGRPCServer(s, p.Impl, p.rows)
	return nil
}

// GRPCClient returns the host's Backend. ctx ends when the plugin process
// exits, which is how the host notices a crash without polling.
func (p *Plugin) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &dispensed{Backend: newGRPCClient(c, p.rows), done: ctx.Done()}, nil
}

type dispensed struct {
	Backend
	done <-chan struct{}
}

// NewPluginLogger returns the logger a plugin should use: JSON lines on the
// process's real stderr, which go-plugin forwards into the host's logger with
// their levels. Create it before Serve: Serve redirects os.Stderr afterwards.
func NewPluginLogger(name string) hclog.Logger {
	level := hclog.Info
	if s := os.Getenv(LogLevelEnv); s != "" {
		if l := hclog.LevelFromString(strings.TrimSpace(s)); l != hclog.NoLevel {
			level = l
		}
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// ServeOption adjusts Serve.
type ServeOption func(*serveConfig)

type serveConfig struct {
	logger        hclog.Logger
	test          *plugin.ServeTestConfig
	watchInterval time.Duration
}

// WithLogger sets the plugin's logger (default NewPluginLogger("")).
func WithLogger(l hclog.Logger) ServeOption { return func(c *serveConfig) { c.logger = l } }

// WithTestConfig serves in go-plugin's in-process test mode: the host
// connects with LaunchConfig.Reattach set to the config sent on
// tc.ReattachConfigCh. The parent watchdog is off in this mode.
func WithTestConfig(tc *plugin.ServeTestConfig) ServeOption {
	return func(c *serveConfig) { c.test = tc }
}

// Serve runs b as a plugin until the host disconnects. Call it from a plugin
// main and write nothing to stdout before it: stdout carries the handshake.
// The plugin exits by itself if the host process dies.
func Serve(b Backend, opts ...ServeOption) {
	cfg := serveConfig{watchInterval: 500 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = NewPluginLogger("")
	}
	if cfg.test == nil {
		go watchParent(hostPID(), cfg.watchInterval, cfg.logger)
	}
	rows, err := pluginRows()
	if err != nil { // rows then move in the messages
		cfg.logger.Warn("shared memory rows unavailable", "error", err)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: {PluginName: &Plugin{Impl: b, rows: rows}}},
		GRPCServer: func(o []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(o, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.ForceServerCodecV2(chunkCodec{}), experimental.BufferPool(rowPool))...)
		},
		Logger: cfg.logger,
		Test:   cfg.test,
	})
}

// HostPIDEnv names the variable in which the host tells a plugin its pid:
// a host that dies while the plugin is still starting leaves it a parent
// other than the host before the plugin could note its parent.
const HostPIDEnv = "EVALRUN_PLUGIN_HOST_PID"

// hostPID is the pid of the process that started the plugin: HostPIDEnv's,
// else the parent's now.
func hostPID() int {
	if pid, err := strconv.Atoi(os.Getenv(HostPIDEnv)); err == nil && pid > 0 {
		return pid
	}
	return os.Getppid()
}

// watchParent exits the plugin once it is no longer the host's child, i.e.
// the host died without killing it (SIGKILL of the host, or a host on an
// OS without Pdeathsig): an orphaned plugin would otherwise keep its model
// in memory. It checks at once, then every interval.
func watchParent(ppid int, every time.Duration, log hclog.Logger) {
	for {
		if os.Getppid() != ppid {
			log.Error("host process is gone; exiting", "host_pid", ppid)
			os.Exit(2)
		}
		time.Sleep(every)
	}
}
