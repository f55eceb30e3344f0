package ingest

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestKafkaHealth drives KafkaHealth with a clock of the test's: one line
// when Kafka stops answering (not before unreachableAfter), a reminder
// after remindEvery, one line when it is back, the readiness answer and
// the gauge following along.
func TestKafkaHealth(t *testing.T) {
	var logs testenv.SyncBuffer
	reg := prometheus.NewRegistry()
	h := NewKafkaHealth([]string{"b1:9092"}, slog.New(slog.NewTextHandler(&logs, nil)), reg)
	now := time.Unix(1000, 0)
	h.now = func() time.Time { return now }
	waiting := int64(48213)
	h.SetWaiting(func() int64 { return waiting })
	gauge := func() float64 { return testutil.ToFloat64(h.reachable) }
	lines := func() []string { return strings.Split(strings.TrimSpace(logs.String()), "\n") }

	h.ok()
	h.check()
	ok, why := h.Ready()
	require.True(t, ok, why)
	require.Empty(t, logs.String())

	// A failure, then silence: not an outage until unreachableAfter.
	now = now.Add(time.Second)
	h.fail(errors.New("dial tcp b1:9092: connection refused"))
	now = now.Add(unreachableAfter - time.Millisecond)
	h.check()
	require.Empty(t, logs.String(), "a single failure is not an outage yet")
	require.Equal(t, 1.0, gauge())
	now = now.Add(time.Millisecond)
	h.fail(errors.New("dial tcp b1:9092: connection refused"))
	h.check()
	require.Len(t, lines(), 1)
	require.Contains(t, lines()[0], "kafka unreachable, waiting for it; 48213 lines waiting, nothing read is dropped")
	require.Contains(t, lines()[0], "connection refused")
	require.True(t, h.Unreachable())
	require.Equal(t, 0.0, gauge())
	ok, why = h.Ready()
	require.False(t, ok)
	require.Equal(t, "kafka unreachable for 2s (dial tcp b1:9092: connection refused)", why)

	// Still down: said again only after remindEvery.
	now = now.Add(remindEvery - time.Second)
	h.fail(errors.New("dial tcp b1:9092: connection refused"))
	h.check()
	require.Len(t, lines(), 1)
	now = now.Add(time.Second)
	h.check()
	require.Len(t, lines(), 2)
	require.Contains(t, lines()[1], "kafka unreachable for 1m2s, 48213 lines waiting")

	// Back.
	now = now.Add(10 * time.Second)
	waiting = 0
	h.ok()
	h.check()
	require.Len(t, lines(), 3)
	require.Contains(t, lines()[2], "kafka reachable again after 1m12s; 0 lines waiting go out now")
	require.False(t, h.Unreachable())
	require.Equal(t, 1.0, gauge())
	ok, _ = h.Ready()
	require.True(t, ok)
}
