package detect_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/schemas"
)

func fakeMeta(nextWindowMs int64) string { return "fake1 next=" + strconv.FormatInt(nextWindowMs, 10) }

// TestCommitFollowsTheCore: a live partition commits what its core's
// commit point says, with its metadata, never the last polled offset; a
// stop commits it too, and a restart hands it back to the new core, which
// publishes no window a second time.
func TestCommitFollowsTheCore(t *testing.T) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.seeds(t), 1)
			e.cores.hotAt = 2
			base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
			produce(t, e.seeds,
				event(e.events, 0, "k1", base),      // window base
				event(e.events, 0, "k1", base+10),   // k1 hot (2 in the window)
				event(e.events, 0, "k2", base+1100), // closes base; opens base+1000 at offset 2
				event(e.events, 0, "k3", base+1200),
			)
			cfg := e.config(t)
			var out syncBuffer
			cfg.Print, cfg.PrintFormat = &out, detect.PrintText
			r := start(t, cfg)
			want := detect.CommitPoint{Offset: 2, Metadata: fakeMeta(base + 1000)}
			eventually(t, "the commit of the core's point", func() bool {
				c := committed(t, e.seeds, e.group, e.events)[0]
				return c.At == want.Offset && c.Metadata == want.Metadata
			})
			require.NoError(t, r.stop(t), "a stop is a clean end")
			c := committed(t, e.seeds, e.group, e.events)[0]
			require.Equal(t, want, detect.CommitPoint{Offset: c.At, Metadata: c.Metadata},
				"after the stop: the open window's first event, not the 4 records read")

			hot := readAll(t, e.seeds, e.hotkeys)
			require.Len(t, hot, 1)
			h, err := schemas.DecodeHotKeyEvent(hot[0].Value)
			require.NoError(t, err)
			require.Equal(t, string(schemas.HotKeyRecordKey("a", "k1")), string(hot[0].Key))
			require.Equal(t, "k1", h.Key)
			require.Positive(t, h.DetectedMs, "the service stamps the publish time")
			require.Contains(t, out.String(), `HOT    a "k1"`)

			// A restart resumes from the commit with its metadata, and
			// re-reads offsets 2 and 3 into window base+1000 only.
			r = start(t, cfg)
			produce(t, e.seeds, event(e.events, 0, "k4", base+2500))
			eventually(t, "window base+1000 published", func() bool {
				for _, rec := range readAll(t, e.seeds, e.windows) {
					if w, _ := schemas.DecodePartitionWindow(rec.Value); w.StartMs == base+1000 {
						return true
					}
				}
				return false
			})
			require.NoError(t, r.stop(t))
			require.Equal(t, []detect.Start{{Offset: 0}, {Offset: want.Offset, Metadata: want.Metadata}}, e.cores.starts()[0])
			counts := map[int64]uint64{}
			n := map[int64]int{}
			for _, rec := range readAll(t, e.seeds, e.windows) {
				w, err := schemas.DecodePartitionWindow(rec.Value)
				require.NoError(t, err)
				counts[w.StartMs] += w.Events
				n[w.StartMs]++
			}
			require.Equal(t, map[int64]int{base: 1, base + 1000: 1}, n, "each window published once")
			require.Equal(t, map[int64]uint64{base: 2, base + 1000: 2}, counts)
		})
	}
}

// TestRevokeCommitsLostDoesNot: a partition moving to another member in
// a rebalance is committed, with its metadata, before the new owner
// starts it; a lost partition is dropped without a commit.
func TestRevokeCommitsLostDoesNot(t *testing.T) {
	for _, b := range brokers {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.seeds(t), 2)
			base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
			for p := range int32(2) {
				produce(t, e.seeds, event(e.events, p, "k", base), event(e.events, p, "k", base+1100))
			}
			cfg := e.config(t)
			cfg.CommitInterval = time.Hour // commits only when a partition is given up
			a := start(t, cfg)
			eventually(t, "both partitions read by the first member", func() bool {
				st := e.cores.starts()
				return len(st[0]) == 1 && len(st[1]) == 1
			})
			// Let the first window's summary be acknowledged, so the
			// commit point is the open window's.
			eventually(t, "window summaries published", func() bool { return len(readAll(t, e.seeds, e.windows)) == 2 })

			bcfg := cfg
			b2 := start(t, bcfg)
			eventually(t, "a partition moved to the second member", func() bool {
				st := e.cores.starts()
				return len(st[0])+len(st[1]) == 3
			})
			st := e.cores.starts()
			moved := int32(0)
			if len(st[1]) == 2 {
				moved = 1
			}
			want := detect.Start{Offset: 1, Metadata: fakeMeta(base + 1000)}
			require.Equal(t, want, st[moved][1], "the new owner starts where the revoke committed")
			kept := 1 - moved
			require.NotContains(t, committed(t, e.seeds, e.group, e.events), kept, "the kept partition is not committed yet")

			// The first member loses its remaining partition: no commit.
			a.svc.Lose(context.Background(), map[string][]int32{e.events: {kept}})
			require.NoError(t, a.stop(t))
			require.NotContains(t, committed(t, e.seeds, e.group, e.events), kept, "a lost partition is never committed")
			require.NoError(t, b2.stop(t))
		})
	}
}
