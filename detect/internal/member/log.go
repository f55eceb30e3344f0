package member

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Logger adapts l to franz-go's logger, at warnings and above: franz-go
// retries what it can, and what it says below a warning is for its own
// debugging.
func Logger(l *slog.Logger) kgo.Logger { return kslog{l} }

type kslog struct{ l *slog.Logger }

func (k kslog) Level() kgo.LogLevel { return kgo.LogLevelWarn }
func (k kslog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, keyvals...)
	default:
		k.l.Debug(msg, keyvals...)
	}
}
