package detect_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// refusingCH is a ClickHouse sink that takes every item and then refuses
// the hot-key events for good (their acknowledgement fails), as a writer
// closed under them does; reports go in.
type refusingCH struct{}

var errRefused = errors.New("refused for good by the test sink")

func (refusingCH) WriteHotKey(_ context.Context, _ *schemas.HotKeyEvent, ack clickhouse.AckFunc) error {
	go ack(errRefused)
	return nil
}

func (refusingCH) WriteReport(_ context.Context, _ *schemas.WindowReport, ack clickhouse.AckFunc) error {
	go ack(nil)
	return nil
}

func (refusingCH) Ready() error { return nil }

// TestHotKeyRefusedForGood: a hot-key event ClickHouse refuses for good
// stops the service with that error, which Ready reports too, and no
// commit of the partition passes the event: a restart must publish it
// again.
func TestHotKeyRefusedForGood(t *testing.T) {
	e := newEnv(t, testenv.KFake(t), 1)
	base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
	evs := []at{
		{accessEvent("k1", base), 0},
		{accessEvent("k1", base+1), 1}, // k1 hot: 2 events in 10 ms
		{accessEvent("k2", base+1100), 2},
		{accessEvent("k3", base+1200), 3},
	}
	for _, ev := range evs {
		produce(t, e.seeds, event(e.events, 0, ev.e.Key, ev.e.TimeMs))
	}
	// Everything acknowledged, the core would resume past the hot event:
	// otherwise the check below proves nothing.
	all := oracle(t, pipeline.Source{Topic: e.events, Partitions: 1, Keyed: true}, pipeline.Start{}, false, evs...)
	allMeta, err := schemas.ParseCommitMeta(all.Metadata)
	require.NoError(t, err)
	require.Greater(t, allMeta.ResumeOffset, int64(1))

	cfg := e.config(t)
	cfg.ClickHouse = refusingCH{}
	r := start(t, cfg)
	var runErr error
	select {
	case runErr = <-r.done:
		close(r.done)
	case <-time.After(testenv.HangGuard):
		t.Fatal("the service did not stop on an output refused for good")
	}
	require.ErrorIs(t, runErr, errRefused)
	require.ErrorContains(t, runErr, "refused for good (hot-key event)")
	require.ErrorIs(t, r.svc.Ready(), errRefused, "Ready says why the service stopped")

	if c, ok := committed(t, e.seeds, e.group, e.events)[0]; ok && c.At >= 0 {
		m, err := schemas.ParseCommitMeta(c.Metadata)
		require.NoError(t, err, "committed %d %q", c.At, c.Metadata)
		require.LessOrEqual(t, m.ResumeOffset, int64(1), "the commit resumes no later than the refused hot event: %q", c.Metadata)
	}
}

// reportRefusingCH takes hot-key events and refuses every report for
// good.
type reportRefusingCH struct{}

func (reportRefusingCH) WriteHotKey(_ context.Context, _ *schemas.HotKeyEvent, ack clickhouse.AckFunc) error {
	go ack(nil)
	return nil
}

func (reportRefusingCH) WriteReport(_ context.Context, _ *schemas.WindowReport, ack clickhouse.AckFunc) error {
	go ack(errRefused)
	return nil
}

func (reportRefusingCH) Ready() error { return nil }

// TestReportRefusedForGood: a report ClickHouse refuses for good stops
// the service with that error, which Ready reports, and the merge
// group's commit never says that report's window is done.
func TestReportRefusedForGood(t *testing.T) {
	e := newEnv(t, testenv.KFake(t), 1)
	base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
	produce(t, e.seeds, event(e.events, 0, "k1", base), event(e.events, 0, "k2", base+1100))
	cfg := e.config(t)
	cfg.ClickHouse = reportRefusingCH{}
	r := start(t, cfg)
	var runErr error
	select {
	case runErr = <-r.done:
		close(r.done)
	case <-time.After(testenv.HangGuard):
		t.Fatal("the service did not stop on a report refused for good")
	}
	require.ErrorIs(t, runErr, errRefused)
	require.ErrorContains(t, runErr, "refused for good")
	require.ErrorIs(t, r.svc.Ready(), errRefused, "Ready says why the service stopped")
	if c, ok := committed(t, e.seeds, e.mergeGroup, e.windows)[0]; ok && c.At >= 0 {
		require.Equal(t, "khm1 done=0", c.Metadata, "no window's reports are all in: committed at %d", c.At)
	}
}
