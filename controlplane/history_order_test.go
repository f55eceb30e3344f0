package controlplane_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestAlertsNewestFirstAfterRestart: a Feed started in a running cluster
// reads the registry's backlog partition after partition; History still
// orders the events by detected_ms, so GET /api/alerts is newest first and
// its limit keeps the newest events.
func TestAlertsNewestFirstAfterRestart(t *testing.T) {
	seeds := testenv.KFake(t)
	reports := testenv.NewTopic(t, seeds, 1)
	hot := testenv.NewTopicWithConfigs(t, seeds, 2, map[string]string{"cleanup.policy": "compact"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	// Ten keys turning hot one after another, over both partitions.
	for i := range 10 {
		e := hotEvent(schemas.HotKeyHot, "shop", "k"+strconv.Itoa(i), baseMs+int64(i)*1000)
		v, err := e.AppendJSON(nil)
		require.NoError(t, err)
		rec := &kgo.Record{Topic: hot, Partition: int32(i % 2), Key: schemas.HotKeyRecordKey(e.App, e.Key), Value: v}
		require.NoError(t, cl.ProduceSync(ctx, rec).FirstErr())
	}

	h := newHistory(t, controlplane.HistoryConfig{})
	f, err := controlplane.NewFeed(controlplane.FeedConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
		Reports: reports, Hotkeys: hot, History: h})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	t.Cleanup(func() { stop(); f.Close(); <-done })
	testenv.Eventually(t, "the backlog read", func() bool { return len(h.Alerts("", 100)) == 10 })

	a := historyServer(t, h, nil, nil)
	page := decode[controlplane.AlertPage](t, a.get("/api/alerts?limit=3", http.StatusOK).body)
	var got []int64
	for _, e := range page.Alerts {
		got = append(got, (e.DetectedMs-baseMs)/1000)
	}
	require.Equal(t, []int64{9, 8, 7}, got, "the three newest alerts, newest first")

	all := decode[controlplane.AlertPage](t, a.get("/api/alerts", http.StatusOK).body)
	require.True(t, slices.IsSortedFunc(all.Alerts, func(x, y *schemas.HotKeyEvent) int { return cmpMs(y.DetectedMs, x.DetectedMs) }),
		"alerts newest first: %v", eventIDs(all.Alerts))
}

func cmpMs(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestReportsNoGapAfterFeedBacklog: detect keys a report by its ID, so one
// scope's windows are spread over every partition of the reports topic,
// and a Feed's backlog reaches back less far on partitions busy with other
// scopes. The Feed tells History from which window on its memory is
// complete, and the reports route asks ClickHouse for everything before
// it: every window of the scope is in the answer, from memory or
// ClickHouse.
func TestReportsNoGapAfterFeedBacklog(t *testing.T) {
	s := newClickHouseStore(t)
	seeds := testenv.KFake(t)
	reports := testenv.NewTopic(t, seeds, 2)
	hot := testenv.NewTopic(t, seeds, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	produce := func(r *schemas.WindowReport, p int32) {
		t.Helper()
		v, err := r.AppendJSON(nil)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: reports, Partition: p, Key: []byte(r.ID), Value: v}).FirstErr())
	}
	var stored []*schemas.WindowReport
	for w := range 20 {
		r := windowReport(schemas.ScopeApp, "shop", w, "k")
		stored = append(stored, r)
		produce(r, int32(w%2))
		if w%2 == 0 {
			// Partition 0 also carries another app's windows.
			produce(windowReport(schemas.ScopeApp, "cart", w, "z"), 0)
		}
	}
	s.write(stored, nil)

	h := newHistory(t, controlplane.HistoryConfig{})
	f, err := controlplane.NewFeed(controlplane.FeedConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
		Reports: reports, Hotkeys: hot, History: h, Backlog: 8})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	t.Cleanup(func() { stop(); f.Close(); <-done })
	testenv.Eventually(t, "the backlog read", func() bool {
		rs, _ := h.Reports(schemas.ScopeApp, "shop", 0, 1<<62, 100)
		cart, _ := h.Reports(schemas.ScopeApp, "cart", 0, 1<<62, 100)
		return len(rs) == 8+4 && len(cart) == 4
	})

	a := historyServer(t, h, s.src, nil)
	want := make([]int64, 20)
	for w := range want {
		want[w] = int64(w) * 1000
	}
	var page controlplane.ReportPage
	check := func() {
		page = decode[controlplane.ReportPage](t, a.get("/api/reports?app=shop&limit=100", http.StatusOK).body)
		require.Empty(t, page.SourceError)
		require.Equal(t, want, reportStarts(page.Reports), "every window of shop is in memory or ClickHouse (history_from_ms=%d)",
			page.HistoryFromMs-baseMs)
	}
	// Until the Feed has read the backlog and found where it cut the
	// partitions, memory is complete from no time: ClickHouse is asked
	// for all. Then it is complete from the latest first window read of
	// a cut partition: partition 0's first read is window 12, partition
	// 1's window 5.
	check()
	testenv.Eventually(t, "memory complete from a known time", func() bool { check(); return page.HistoryFromMs != 0 })
	require.Equal(t, int64(baseMs+12000), page.HistoryFromMs)
}
