package detect_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// member is a running service whose log the test reads.
type member struct {
	*running
	log *testenv.SyncBuffer
}

func startMember(t *testing.T, cfg detect.Config) member {
	t.Helper()
	log := &testenv.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m := member{running: start(t, cfg), log: log}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("member log:\n%s", log)
		}
	})
	return m
}

// waitLog waits until the member logged a line matching expr.
func (m member) waitLog(t *testing.T, expr string) {
	t.Helper()
	re := regexp.MustCompile(expr)
	testenv.Eventually(t, expr, func() bool { return re.MatchString(m.log.String()) })
}

// closers are one event per partition at tsMs, each keyed to land on its
// partition: with no lateness, they close every window before tsMs's on
// every partition.
func closers(topic string, parts int32, tsMs int64) []*kgo.Record {
	var out []*kgo.Record
	for p := range parts {
		for i := 0; ; i++ {
			key := fmt.Sprintf("closer:%d", i)
			if partitionOf(key, parts) == p {
				ev := schemas.AccessEvent{TimeMs: tsMs, Key: key, App: "shop", Op: "GET"}
				out = append(out, &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: schemas.AppendJSON(nil, &ev)})
				break
			}
		}
	}
	return out
}

// TestRebalanceMidRun: live instances of one group share the partitions
// while input arrives; a second joins after the first third of the input,
// a third after the second, and the first (the merger) stops. Every
// window is reported exactly once per scope, with partitions moving
// (revoked, committed, resumed elsewhere) and the merger moving to another
// member, and the reports are byte for byte those of one instance reading
// the same input in a batch run.
func TestRebalanceMidRun(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	const parts, seconds = 4, 12
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, parts)
		evs := streamEvents(11, base, seconds*1000, 1)
		third := func(i int) []schemas.AccessEvent {
			var out []schemas.AccessEvent
			for _, ev := range evs {
				if (ev.TimeMs-base)*3/(seconds*1000) == int64(i) {
					out = append(out, ev)
				}
			}
			return out
		}
		live := goldenConfig(t, e)
		live.Limits.MaxSkew = 0
		// No window closes by the wall clock and none is reported
		// partial while a partition moves (it is not silent for the
		// partition timeout): the output depends on the input only.
		live.Merge.MaxPendingWindows = 1000
		assigned := `msg="partitions assigned" partitions="?map\[` + regexp.QuoteMeta(e.events) + `:\[\d`

		produceMany(t, e.seeds, records(e.events, parts, third(0)))
		a := startMember(t, live)
		a.waitLog(t, assigned)
		a.waitLog(t, `msg="elected merger"`)
		testenv.Eventually(t, "a first report", func() bool { return readReports(t, e.seeds, e.reports).records > 0 })

		// The second joins while the first reads the second third.
		produceMany(t, e.seeds, records(e.events, parts, third(1)))
		b2 := startMember(t, live)
		b2.waitLog(t, assigned)

		// The third joins, and the first stops, while the last third
		// arrives.
		produced := make(chan error, 1)
		go func() { produced <- produceAsync(e.seeds, records(e.events, parts, third(2))) }()
		c := startMember(t, live)
		c.waitLog(t, assigned)
		require.NoError(t, a.stop(t), "the first member stops cleanly")
		require.Regexp(t, `msg="partitions released" partitions="?map\[\S+:\[\d( \d)*\]\]"? lost=false`, a.log.String(),
			"the first member gave partitions up in a rebalance, committing them")
		require.NoError(t, <-produced)
		endMs := base + (seconds+1)*1000
		produce(t, e.seeds, closers(e.events, parts, endMs)...)

		// Windows before endMs: cluster and three apps each (the empty
		// window before endMs has no report).
		want := seconds * 4
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			for id, vs := range readReports(t, e.seeds, e.reports).byID {
				t.Logf("report %s x%d", id, len(vs))
			}
			for _, r := range readAll(t, e.seeds, e.windows) {
				w, err := schemas.DecodePartitionWindow(r.Value)
				require.NoError(t, err)
				t.Logf("summary %d p%d events=%d final=%v offset %d", (w.StartMs-base)/1000, w.Partition, w.Events, w.Final, r.Offset)
			}
		})
		testenv.Eventually(t, "every closed window reported", func() bool {
			return len(readReports(t, e.seeds, e.reports).byID) >= want
		})
		require.Regexp(t, `msg="elected merger"`, b2.log.String()+c.log.String(), "another member took the merger over")
		require.NoError(t, b2.stop(t))
		require.NoError(t, c.stop(t))
		got := readReports(t, e.seeds, e.reports).once(t)
		require.Len(t, got, want, "no report for the window of the closers, which stays open")

		ref := e.over(t)
		runToEnd(t, func() detect.Config { c := goldenConfig(t, ref); c.Limits.MaxSkew = 0; return c }())
		all := readReports(t, ref.seeds, ref.reports).once(t)
		for _, scope := range []struct{ scope, app string }{{schemas.ScopeCluster, ""}, {schemas.ScopeApp, "shop"}} {
			id := schemas.WindowReportID(scope.scope, scope.app, endMs)
			require.Contains(t, all, id)
			delete(all, id)
		}
		require.Equal(t, string(ordered(t, all, ref.events)), string(ordered(t, got, e.events)),
			"the reports of one batch run, byte for byte")
	})
}

// produceAsync writes recs in order, for a goroutine other than the
// test's.
func produceAsync(seeds []string, recs []*kgo.Record) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// TestMergerEndCheckHoldsRebalances: an ExitAtEnd merger's end check
// (report everything, drain, commit) runs inside a turn of its group
// loop, so a rebalance asked for meanwhile waits for it. Let in, the
// revoke callback would drain, commit and drop the merger while the end
// check still uses it, and commit the windows topic in a generation the
// end check does not know of.
func TestMergerEndCheckHoldsRebalances(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		produce(t, e.seeds, event(e.events, 0, "k", base), event(e.events, 0, "k", base+1500))
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		// Eager balancing: a rebalance revokes every partition, the
		// windows topic's included (cooperative-sticky would keep it).
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.Balancers(kgo.RangeBalancer()))
		// No periodic commit: only the end check and a revoke commit the
		// windows topic.
		cfg.CommitInterval = time.Hour
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		adm := e.admin(t)
		var atCheck, duringCheck int
		svc.AtMergerEnd(func(cl *kgo.Client) {
			atCheck++
			cl.ForceRebalance()
			// A revoke let in now commits the windows topic at once,
			// before the end check does. Held, it never comes: the
			// watch ends without a commit however long it is (a machine
			// too slow to revoke within it only hides the fault).
			for range 40 {
				time.Sleep(50 * time.Millisecond)
				os, err := adm.FetchOffsets(context.Background(), e.mergeGroup)
				if err != nil {
					continue
				}
				if _, ok := os.Lookup(e.windows, 0); ok {
					duringCheck++
					return
				}
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		require.NoError(t, svc.Run(ctx))
		require.Equal(t, 1, atCheck, "end checks that reached their commit")
		require.Zero(t, duringCheck, "the windows topic was committed during the merger's end check: a rebalance revoked it meanwhile")
		m := committed(t, e.seeds, e.mergeGroup, e.windows)
		require.Contains(t, m, int32(0), "the end check commits the windows topic")
		var reported uint64
		for _, r := range readAll(t, e.seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			if rep.Scope == schemas.ScopeCluster {
				reported += rep.Events
			}
		}
		require.EqualValues(t, 2, reported, "events in the cluster reports")
	})
}
