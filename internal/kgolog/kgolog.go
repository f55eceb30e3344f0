// Package kgolog writes franz-go's own log lines through log/slog, the
// same way for every Kafka client in keyheat: its errors as errors, its
// warnings as warnings, and the rest (franz-go's info and debug lines) at
// debug, asked of franz-go only when the logger is at debug.
package kgolog

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Logger is a kgo.Logger that writes to a *slog.Logger.
type Logger struct {
	l        *slog.Logger
	warnOnly bool
	quiet    func() bool
}

var _ kgo.Logger = (*Logger)(nil)

// Option sets how a Logger treats franz-go's lines.
type Option func(*Logger)

// WarnAndAbove never asks franz-go for its lines below a warning, even
// when the logger is at debug: for a client with many partitions, whose
// debug lines (one per fetch and commit) would drown the program's own.
func WarnAndAbove() Option { return func(k *Logger) { k.warnOnly = true } }

// Quiet writes franz-go's warnings at debug while quiet returns true: a
// caller that already said, plainly and once, that Kafka cannot be
// reached keeps franz-go's retry warnings out of the way meanwhile.
func Quiet(quiet func() bool) Option { return func(k *Logger) { k.quiet = quiet } }

// New returns a Logger writing to l.
func New(l *slog.Logger, opts ...Option) *Logger {
	k := &Logger{l: l}
	for _, o := range opts {
		o(k)
	}
	return k
}

// Level is the most verbose level franz-go is asked for.
func (k *Logger) Level() kgo.LogLevel {
	if !k.warnOnly && k.l.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelWarn
}

// Log writes one of franz-go's lines.
func (k *Logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch {
	case level == kgo.LogLevelError:
		k.l.Error(msg, keyvals...)
	case level == kgo.LogLevelWarn && (k.quiet == nil || !k.quiet()):
		k.l.Warn(msg, keyvals...)
	default:
		k.l.Debug(msg, keyvals...)
	}
}
