package main

import (
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestKilledInstanceGivenUp: of two instances, the one that is not the
// merger is killed with SIGKILL. Its partition says nothing more, so once
// detect.partition_timeout passed the merger reports the windows without
// it, naming it; it does not wait for the group to notice (here after a
// session timeout ten times longer). Once the group gives the partition
// to the instance left, it is read again from its commit: what it sends
// for the windows already reported is dropped and said to be in no
// report, and the windows after it are complete again.
func TestKilledInstanceGivenUp(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		events := testenv.NewTopic(t, seeds, 2)
		env := newRunEnv(t, seeds, events)
		args := append([]string{"run", "--pipeline.idle_timeout=1h"},
			env.flags("--detect.partition_timeout=3s", "--detect.session_timeout=30s")...)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()

		a := start(t, nil, args...)
		a.WaitStderr(`msg="elected merger"`)
		a.WaitStderr(`msg="partitions assigned" partitions="map\[\S+:\[0 1\]\]"`)
		b2 := start(t, nil, args...)
		line := b2.WaitStderr(`msg="partitions assigned" partitions="?map\[\S+:\[\d\]\]`)
		lost := regexp.MustCompile(`:\[(\d)\]\]`).FindStringSubmatch(line)[1]
		gone := events + "/" + lost

		// Windows 0–9 on both partitions, reported complete.
		produceEvents(t, seeds, events, 2000, base, 5, 0, 50)
		clusterReports := func() map[int64]*schemas.WindowReport { return clusterReportsOn(t, seeds, env.reports) }
		testenv.Eventually(t, "windows 0-8 reported", func() bool { return len(clusterReports()) == 9 })
		for w, r := range clusterReports() {
			require.False(t, r.Partial, "window %d", w)
		}

		b2.Kill()
		// Windows 10–19: only the partition left is read.
		produceEvents(t, seeds, events, 2000, base+10_000, 5, 0, 50)
		var partial *schemas.WindowReport
		testenv.Eventually(t, "a window reported without the killed instance's partition", func() bool {
			for _, r := range clusterReports() {
				if r.Partial {
					partial = r
				}
			}
			return partial != nil
		})
		require.Equal(t, []string{gone}, partial.Missing, "the partition that fell silent is named")

		// The group gives the partition to the instance left, which
		// reads it again from its commit.
		a.WaitStderr(`msg="partitions assigned" partitions="?map\[\S+:\[` + lost + `\]\]`)
		produceEvents(t, seeds, events, 2000, base+20_000, 5, 0, 50)
		testenv.Eventually(t, "windows 20-28 reported", func() bool {
			rs := clusterReports()
			for w := base + 20_000; w < base+29_000; w += 1000 {
				if rs[w] == nil {
					return false
				}
			}
			return true
		})
		for w, r := range clusterReports() {
			if w >= base+20_000 {
				require.False(t, r.Partial, "window %d, after the partition was taken over", w)
			}
		}
		a.WaitStderr(`msg="partition window summary dropped: its window was already reported without this partition; its events are in no report"`)
		require.Equal(t, 0, a.Stop())
	})
}

// TestRestartedPartitionResendsAreDuplicates: an instance killed with
// SIGKILL and restarted reads its partition again from its commit and
// sends again the summaries of windows the merger already reported with
// them. Those are duplicates: nothing was lost, so the merger neither
// warns that events are in no report nor counts late events, and every
// window is complete.
func TestRestartedPartitionResendsAreDuplicates(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		events := testenv.NewTopic(t, seeds, 2)
		env := newRunEnv(t, seeds, events)
		args := append([]string{"run", "--pipeline.idle_timeout=1h"}, env.flags()...)
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		metrics := testenv.FreeAddr(t)

		a := start(t, nil, append([]string{"run", "--metrics.addr=" + metrics}, args[1:]...)...)
		a.WaitStderr(`msg="elected merger"`)
		a.WaitStderr(`msg="partitions assigned" partitions="map\[\S+:\[0 1\]\]"`)
		// The first b never commits, so its successor reads its
		// partition from the start and sends every window again: how
		// soon a commit follows a summary is up to the machine, and the
		// resends must happen whatever it is.
		b2 := start(t, nil, append(args, "--detect.commit_interval=1h")...)
		b2.WaitStderr(`msg="partitions assigned" partitions="?map\[\S+:\[\d\]\]`)

		clusterReports := func() map[int64]*schemas.WindowReport { return clusterReportsOn(t, seeds, env.reports) }
		produceEvents(t, seeds, events, 2000, base, 5, 0, 50)
		testenv.Eventually(t, "windows 0-8 reported", func() bool { return len(clusterReports()) == 9 })
		b2.Kill()
		b2 = start(t, nil, args...)
		b2.WaitStderr(`msg="partitions assigned" partitions="?map\[\S+:\[\d\]\]`)
		produceEvents(t, seeds, events, 2000, base+10_000, 5, 0, 50)
		testenv.Eventually(t, "windows 0-18 reported", func() bool { return len(clusterReports()) == 19 })
		for w, r := range clusterReports() {
			require.False(t, r.Partial, "window %d", w)
		}
		scrape := func() string {
			resp, err := http.Get("http://" + metrics + "/metrics") //nolint:noctx // a test against a local server
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return string(body)
		}
		m := scrape()
		require.Contains(t, m, "keyheat_merge_late_events_total 0", "nothing was lost")
		require.Regexp(t, `keyheat_merge_summaries_total\{result="duplicate"\} [1-9]`, m,
			"the restarted partition sent reported windows again")
		require.Empty(t, a.Stderr.Match(regexpOf(`in no report`)), "no warning of a loss that did not happen")
		require.Equal(t, 0, b2.Stop())
		require.Equal(t, 0, a.Stop())
	})
}

// clusterReportsOn reads the cluster reports on topic, by window start.
func clusterReportsOn(t *testing.T, seeds []string, topic string) map[int64]*schemas.WindowReport {
	t.Helper()
	out := map[int64]*schemas.WindowReport{}
	for _, r := range readTopic(t, seeds, topic) {
		x, err := schemas.DecodeWindowReport(r.Value)
		require.NoError(t, err)
		if x.Scope == schemas.ScopeCluster {
			out[x.StartMs] = x
		}
	}
	return out
}
