package backend

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogSink forwards hclog records (plugin log lines re-emitted by go-plugin)
// to the host's slog logger.
type slogSink struct{ l *slog.Logger }

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	lv := slogLevel(level)
	if lv == slog.LevelInfo {
		// Plugins' info lines repeat what the host reports: debug level.
		lv = slog.LevelDebug
	}
	s.l.Log(context.Background(), lv, msg, append([]any{"logger", name}, args...)...)
}

func slogLevel(l hclog.Level) slog.Level {
	switch {
	case l <= hclog.Debug:
		return slog.LevelDebug
	case l == hclog.Info:
		return slog.LevelInfo
	case l == hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// slogBridge routes plugin logs into the host's slog logger. go-plugin's
// own chatter is at debug level.
func slogBridge(l *slog.Logger) hclog.Logger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "plugin", Level: hclog.Trace, Output: io.Discard})
	il.RegisterSink(slogSink{l})
	return il
}
