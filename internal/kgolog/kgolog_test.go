package kgolog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func logger(level slog.Level) (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})), &buf
}

// TestLevels: franz-go is asked for its debug lines only when the logger
// is at debug and the Logger was not made WarnAndAbove; each line keeps
// its level (info and debug both at debug) and its key-value pairs.
func TestLevels(t *testing.T) {
	l, _ := logger(slog.LevelInfo)
	require.Equal(t, kgo.LogLevelWarn, New(l).Level())
	l, _ = logger(slog.LevelDebug)
	require.Equal(t, kgo.LogLevelDebug, New(l).Level())
	require.Equal(t, kgo.LogLevelWarn, New(l, WarnAndAbove()).Level())

	l, buf := logger(slog.LevelDebug)
	k := New(l)
	k.Log(kgo.LogLevelError, "e", "broker", 1)
	k.Log(kgo.LogLevelWarn, "w", "broker", 2)
	k.Log(kgo.LogLevelInfo, "i")
	k.Log(kgo.LogLevelDebug, "d")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4)
	for i, want := range []string{"level=ERROR msg=e broker=1", "level=WARN msg=w broker=2", "level=DEBUG msg=i", "level=DEBUG msg=d"} {
		require.Contains(t, lines[i], want)
	}
}

// TestQuiet: while quiet says so, warnings go to debug; errors never do.
func TestQuiet(t *testing.T) {
	quiet := true
	l, buf := logger(slog.LevelInfo)
	k := New(l, Quiet(func() bool { return quiet }))
	k.Log(kgo.LogLevelWarn, "retrying")
	k.Log(kgo.LogLevelError, "failed")
	require.NotContains(t, buf.String(), "retrying")
	require.Contains(t, buf.String(), "level=ERROR msg=failed")
	quiet = false
	k.Log(kgo.LogLevelWarn, "retrying")
	require.Contains(t, buf.String(), "level=WARN msg=retrying")
}
