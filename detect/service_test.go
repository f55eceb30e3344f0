package detect_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// TestBadRecordsAreDeadLettered: junk bytes, an empty key and a time far
// in the future each become a dead letter naming the record, and every
// good event around them is counted; the run ends at the end of the
// input, commits everything, and the merger reports every window.
func TestBadRecordsAreDeadLettered(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		future := time.Now().Add(30 * 24 * time.Hour).UnixMilli()
		empty := schemas.AccessEvent{TimeMs: base, Key: "", App: "a"}
		recs := []*kgo.Record{
			event(e.events, 0, "k1", base),
			raw(e.events, 0, []byte("\x00\xffjunk")),
			event(e.events, 0, "k1", base+10),
			raw(e.events, 0, schemas.AppendJSON(nil, &empty)),
			event(e.events, 0, "k2", base+1500),
			event(e.events, 0, "k3", future),
			event(e.events, 0, "k2", base+2100),
			event(e.events, 1, "k9", base+200),
			event(e.events, 1, "k9", base+2300),
		}
		produce(t, e.seeds, recs...)
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		require.NoError(t, svc.Run(ctx), "an exit-at-end run ends by itself, cleanly")

		dlq := readAll(t, e.seeds, e.dlq)
		require.Len(t, dlq, 3)
		var reasons []schemas.Reason
		for _, r := range dlq {
			var d schemas.DeadLetter
			require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
			src := schemas.KafkaSource(e.events, 0, 0)
			src = src[:strings.LastIndexByte(src, '@')+1]
			require.True(t, strings.HasPrefix(d.Source, src), "source %q", d.Source)
			off := d.Source[len(src):]
			require.Equal(t, schemas.HeaderRecordID, r.Headers[0].Key)
			require.Equal(t, e.events+"/0/"+off, string(r.Headers[0].Value), "the keyheat-id names the record")
			reasons = append(reasons, d.Reason)
		}
		require.ElementsMatch(t, []schemas.Reason{schemas.ReasonParse, schemas.ReasonEmptyKey, schemas.ReasonTimeSkew}, reasons)

		perPart := map[int32]uint64{}
		finals := map[int32]int{}
		for _, r := range readAll(t, e.seeds, e.windows) {
			w, err := schemas.DecodePartitionWindow(r.Value)
			require.NoError(t, err)
			require.Equal(t, w.ID, string(r.Key))
			perPart[w.Partition] += w.Events
			if w.Final {
				finals[w.Partition]++
			}
		}
		require.Equal(t, map[int32]uint64{0: 4, 1: 2}, perPart, "every good event counted once, no bad one")
		require.Equal(t, map[int32]int{0: 1, 1: 1}, finals, "each partition marks its last window final")

		var reported uint64
		for _, r := range readAll(t, e.seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			require.Equal(t, rep.ID, string(r.Key))
			require.False(t, rep.Partial, "window %d: every partition reported it", rep.StartMs)
			if rep.Scope == schemas.ScopeCluster {
				reported += rep.Events
			}
		}
		require.EqualValues(t, 6, reported)

		// Committed: what the core says once everything is
		// acknowledged, with its metadata; dead letters hold nothing.
		c := committed(t, e.seeds, e.group, e.events)
		src := pipeline.Source{Topic: e.events, Partition: 0, Partitions: 2, Keyed: true}
		want0 := oracle(t, src, pipeline.Start{}, true, at{accessEvent("k1", base), 0}, at{accessEvent("k1", base+10), 2},
			at{accessEvent("k2", base+1500), 4}, at{accessEvent("k2", base+2100), 6})
		src.Partition = 1
		want1 := oracle(t, src, pipeline.Start{}, true, at{accessEvent("k9", base+200), 0}, at{accessEvent("k9", base+2300), 1})
		require.Equal(t, want0, pipeline.CommitPoint{Offset: c[0].At, Metadata: c[0].Metadata})
		require.Equal(t, want1, pipeline.CommitPoint{Offset: c[1].At, Metadata: c[1].Metadata})
		m := committed(t, e.seeds, e.mergeGroup, e.windows)
		require.Equal(t, "khm1 done="+strconv.FormatInt(base+3000, 10), m[0].Metadata)
	})
}

// TestExitAtEndMoreInstancesThanPartitions: an exit-at-end member that
// the group gives nothing (more instances than partitions) ends once the
// group is stable without it, and the merger reports every window once
// every member is done.
func TestExitAtEndMoreInstancesThanPartitions(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		produce(t, e.seeds, event(e.events, 0, "k", base), event(e.events, 0, "k", base+1500))
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		done := make(chan error, 2)
		for range 2 {
			svc, err := detect.New(cfg)
			require.NoError(t, err)
			go func() { done <- svc.Run(ctx) }()
		}
		require.NoError(t, <-done)
		require.NoError(t, <-done)
		var reported uint64
		for _, r := range readAll(t, e.seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			if rep.Scope == schemas.ScopeCluster {
				reported += rep.Events
			}
		}
		require.EqualValues(t, 2, reported)
	})
}

// TestLargeSummaries: a busy window of several apps makes a summary past
// Kafka's default 1 MB record limit (every app's slot counts and distinct
// sketch); the topics detect creates take it.
func TestLargeSummaries(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		var recs []*kgo.Record
		// Long keys: every app's lists carry hundreds of them.
		pad := "/" + strings.Repeat("x", 255)
		for i := range 150_000 {
			ev := schemas.AccessEvent{TimeMs: base + int64(i)/200, Key: "k" + strconv.Itoa(i) + pad, App: "app" + strconv.Itoa(i%64)}
			recs = append(recs, &kgo.Record{Topic: e.events, Key: []byte(ev.Key), Value: schemas.AppendJSON(nil, &ev)})
		}
		produce(t, e.seeds, recs...)
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		// 64 apps' parts, each with its lists of long keys and its
		// distinct sketch, make a binary summary of several MB.
		cfg.Pipeline.MaxApps = 64
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		require.NoError(t, svc.Run(ctx))
		largest := 0
		var events uint64
		for _, r := range readAll(t, e.seeds, e.windows) {
			largest = max(largest, len(r.Value))
			w, err := schemas.DecodePartitionWindow(r.Value)
			require.NoError(t, err)
			events += w.Events
		}
		t.Logf("largest summary: %d bytes", largest)
		require.Greater(t, largest, 1<<20, "the test needs a summary over 1 MiB")
		require.EqualValues(t, 150_000, events)
	})
}
