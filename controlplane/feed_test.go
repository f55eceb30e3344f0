package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestFeed: a feed started after 30 windows were reported reads back the
// last Backlog records of each partition (no more), follows what comes
// after, replaces a re-published window, and passes detector events to the
// alerts while it skips manual entries, tombstones and junk.
func TestFeed(t *testing.T) {
	seeds := testenv.KFake(t)
	reports := testenv.NewTopic(t, seeds, 1)
	hot := testenv.NewTopic(t, seeds, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
	rep := func(w int, keys ...string) *kgo.Record {
		r := windowReport(schemas.ScopeCluster, "", w, keys...)
		v, err := r.AppendJSON(nil)
		require.NoError(t, err)
		return &kgo.Record{Topic: reports, Key: []byte(r.ID), Value: v}
	}
	onHot := func(r *kgo.Record) *kgo.Record { r.Topic = hot; return r }
	for w := range 30 {
		produce(rep(w, "a"))
	}
	produce(onHot(detector(schemas.HotKeyHot, "shop", "old", 10)))

	h := newHistory(t, controlplane.HistoryConfig{})
	reg := prometheus.NewRegistry()
	f, err := controlplane.NewFeed(controlplane.FeedConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
		Reports: reports, Hotkeys: hot, History: h, Backlog: 10, Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() { cancel(); f.Close(); <-done })

	testenv.Eventually(t, "the backlog read", func() bool {
		r, ok := h.Latest(schemas.ScopeCluster, "")
		return ok && r.StartMs == baseMs+29*1000 && len(h.Alerts("", 10)) == 1
	})
	got, _ := h.Reports(schemas.ScopeCluster, "", 0, 1<<62, 100)
	require.Equal(t, 10, len(got), "the last 10 records of the partition, not the 30")
	require.EqualValues(t, baseMs+20*1000, got[0].StartMs)

	// Followed: a new window, window 29 re-published with another top, a
	// detector event, and what is not one.
	produce(rep(30, "b"), rep(29, "c"))
	manual := detector(schemas.HotKeyHot, "shop", "m", 1)
	manual.Key = schemas.ManualRecordKey("shop", "m")
	produce(onHot(detector(schemas.HotKeyCooled, "shop", "old", 0)), onHot(manual),
		&kgo.Record{Topic: hot, Key: schemas.HotKeyRecordKey("shop", "gone")},
		&kgo.Record{Topic: hot, Key: schemas.HotKeyRecordKey("shop", "junk"), Value: []byte("\x00not json")},
		&kgo.Record{Topic: reports, Key: []byte("junk"), Value: []byte("{")})
	testenv.Eventually(t, "the new records read", func() bool {
		return testutil.ToFloat64(f.RecordsCounter("reports", "invalid")) == 1 &&
			testutil.ToFloat64(f.RecordsCounter("hotkeys", "invalid")) == 1
	})
	r, ok := h.Latest(schemas.ScopeCluster, "")
	require.True(t, ok)
	require.EqualValues(t, baseMs+30*1000, r.StartMs)
	got, _ = h.Reports(schemas.ScopeCluster, "", baseMs+29*1000, baseMs+30*1000, 10)
	require.Len(t, got, 1)
	require.Equal(t, "c", got[0].Top[0].Key, "the re-published window replaced the one held")
	alerts := h.Alerts("", 10)
	require.Len(t, alerts, 2, "the detector's hot and cooled; not the manual entry, tombstone or junk")
	require.Equal(t, schemas.HotKeyCooled, alerts[0].Type, "newest first")
	require.EqualValues(t, 2, testutil.ToFloat64(f.RecordsCounter("hotkeys", "skipped")))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(hangGuard):
		t.Fatal("Run did not return after its context ended")
	}
	done <- nil // for the cleanup
}

// TestFeedCloseWhileListing: a feed that cannot reach the brokers keeps
// trying to list the topics' offsets, and Close ends its Run all the same
// (detect runs it without a context of its own).
func TestFeedCloseWhileListing(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	f, err := controlplane.NewFeed(controlplane.FeedConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))},
		Reports: "reports", Hotkeys: "hotkeys", History: h})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	f.Close()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(hangGuard):
		t.Fatal("Run did not return after Close")
	}
}
