package detect_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// lines returns the lines of out matching expr.
func lines(out, expr string) []string {
	re := regexp.MustCompile(expr)
	var m []string
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			m = append(m, l)
		}
	}
	return m
}

// mismatches is keyheat_detect_key_mismatch_total of topic in reg.
func mismatches(t *testing.T, reg *prometheus.Registry, topic string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "keyheat_detect_key_mismatch_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "topic" && l.GetValue() == topic {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestKeyedAutoSaidOncePerTopic: one service reads a keyed topic and a
// topic whose records have no key, each of four partitions, with
// detect.keyed: auto. The log says at INFO, once per topic, which it
// decided and from what record, and warns of nothing.
func TestKeyedAutoSaidOncePerTopic(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 4)
		unkeyed := testenv.NewTopic(t, e.seeds, 4)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		var recs []*kgo.Record
		for i := range 400 {
			p := int32(i % 4)
			ev := accessEvent(fmt.Sprintf("key:%d", i%37), base+int64(i))
			recs = append(recs, event(e.events, p, ev.Key, ev.TimeMs),
				&kgo.Record{Topic: unkeyed, Partition: p, Value: schemas.AppendJSON(nil, &ev)})
		}
		produce(t, e.seeds, recs...)
		cfg := e.config(t)
		cfg.Topics.Events = ""
		cfg.Options.Topics = []string{e.events, unkeyed}
		log := logTo(t, &cfg)
		runToEnd(t, cfg)

		out := log.String()
		keyedLines := lines(out, `level=INFO msg="events topic keyed by access key`)
		require.Len(t, keyedLines, 1, "once for the keyed topic:\n%s", out)
		require.Contains(t, keyedLines[0], " topic="+e.events+" keyed=true setting=auto why=")
		// Keys by their key_hash (log.keys: hash, the default).
		require.Regexp(t, `record_key_hash=[0-9a-f]{16} access_key_hash=[0-9a-f]{16}$`, keyedLines[0])
		require.NotRegexp(t, `key:\d`, keyedLines[0])
		notKeyed := lines(out, `level=INFO msg="events topic not keyed by access key`)
		require.Len(t, notKeyed, 1, "once for the topic without record keys:\n%s", out)
		require.Contains(t, notKeyed[0], " topic="+unkeyed+" keyed=false setting=auto why=")
		require.Regexp(t, `record_key_hash=`+schemas.KeyHash("")+` access_key_hash=[0-9a-f]{16}$`, notKeyed[0])
		require.Empty(t, lines(out, `level=WARN .*keyed`), "nothing to warn of")
	})
}

// TestKeyedAutoSwitchesWhenNotKeyed: every partition's first record is
// keyed, so detect.keyed: auto finds them keyed; every record after it has
// no key and the keys spread over all four partitions (a topic written
// round-robin). Each partition switches to not keyed at its second record:
// the reports bound every key's true count (computed here) and claim
// exactness only where they have it, one WARN says so for the topic, and
// the mismatch metric counts every record that was not keyed.
func TestKeyedAutoSwitchesWhenNotKeyed(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts = 4
		e := newEnv(t, seeds, parts)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		exact := map[int64]map[string]uint64{}
		var recs []*kgo.Record
		const n = 30_000
		for i := range n {
			r := 1 + (i*7919)%3000
			if i%2 == 0 {
				r = 1 + (i/2*31)%40
			}
			ev := accessEvent(fmt.Sprintf("key:%d", r), base+int64(i)*1900/n)
			w := ev.TimeMs - ev.TimeMs%1000
			if exact[w] == nil {
				exact[w] = map[string]uint64{}
			}
			exact[w][ev.Key]++
			rec := &kgo.Record{Topic: e.events, Partition: int32(i % parts), Value: schemas.AppendJSON(nil, &ev)}
			if i < parts {
				rec.Key = []byte(ev.Key) // each partition's first record
			}
			recs = append(recs, rec)
		}
		produceMany(t, e.seeds, recs)
		reg := prometheus.NewRegistry()
		cfg := e.config(t)
		log := logTo(t, &cfg)
		cfg.Registerer = reg
		cfg.LogRawKeys = true
		runToEnd(t, cfg)

		seen := 0
		for _, r := range readAll(t, e.seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			truth := exact[rep.StartMs]
			require.NotNil(t, truth, "window %d has no events", rep.StartMs)
			if rep.Scope == schemas.ScopeCluster {
				seen++
			}
			listed := map[string]bool{}
			outside := 0
			for _, k := range rep.Top {
				listed[k.Key] = true
				if k.Count-k.Error > truth[k.Key] || k.Count < truth[k.Key] {
					outside++
					if outside <= 3 {
						t.Errorf("%s window %d %s: true %d outside [%d, %d]", rep.Scope, rep.StartMs, k.Key, truth[k.Key], k.Count-k.Error, k.Count)
					}
				}
			}
			require.Zero(t, outside, "%s window %d: every listed key's true count lies within its bounds", rep.Scope, rep.StartMs)
			require.False(t, rep.Keyed, "%s window %d: its records are not keyed", rep.Scope, rep.StartMs)
			require.True(t, rep.Approximate, "%s window %d: keys spread over partitions cut from their lists", rep.Scope, rep.StartMs)
			for k, c := range truth {
				if !listed[k] {
					require.LessOrEqual(t, c, rep.Floor, "%s: true %d, not listed, above the floor", k, c)
				}
			}
		}
		require.Equal(t, 2, seen, "both windows reported")

		out := log.String()
		require.Len(t, lines(out, `level=INFO msg="events topic keyed by access key.* topic=`+e.events+` `), 1, out)
		warn := lines(out, `level=WARN msg="a record's key is not its access key on a partition detect.keyed: auto had found keyed`)
		require.Len(t, warn, 1, "one WARN for the topic:\n%s", out)
		require.Regexp(t, ` topic=`+e.events+` partition=\d offset=1 record_key="" record_key_hash=`+schemas.KeyHash("")+
			` access_key=key:\d+ access_key_hash=[0-9a-f]{16}`, warn[0], "the keys themselves with LogRawKeys")
		require.Len(t, lines(out, `level=INFO msg="another partition of the topic switched to not keyed" topic=`+e.events+` partition=\d offset=1 `), parts-1, out)
		require.EqualValues(t, n-parts, mismatches(t, reg, e.events), "every record not keyed is counted, not only each partition's first")
	})
}

// TestKeyedTrueRefusesRecordsNotKeyed: with detect.keyed: true, partition
// 0 has keyed records in windows 0 and 1, then, at offset 15, a record
// without a key. The run stops with a *KeyMismatchError naming the topic,
// partition, offset and setting; the partition's commit is exactly where
// the keyed records before it put it (window 0 acknowledged, window 1
// still open), an oracle core fed them says, no report covers a window
// the record falls in, and the metric counts the one record.
func TestKeyedTrueRefusesRecordsNotKeyed(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		var recs []*kgo.Record
		var before []at
		for i := range 15 {
			key := fmt.Sprintf("key:%d", i%3)
			ts := base + int64(i)*100 // 100 ms apart: no key is hot
			recs = append(recs, event(e.events, 0, key, ts))
			before = append(before, at{accessEvent(key, ts), int64(i)})
		}
		bad := accessEvent("key:0", base+1500)
		recs = append(recs, &kgo.Record{Topic: e.events, Partition: 0, Value: schemas.AppendJSON(nil, &bad)})
		for i := range 10 {
			recs = append(recs, event(e.events, 0, "key:1", base+2000+int64(i)), event(e.events, 1, "key:9", base+int64(i)*300))
		}
		produce(t, e.seeds, recs...)

		reg := prometheus.NewRegistry()
		cfg := e.config(t)
		cfg.Keyed = detect.KeyedTrue
		cfg.ExitAtEnd = true
		log := logTo(t, &cfg)
		cfg.Registerer = reg
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		err = svc.Run(ctx)
		var km *detect.KeyMismatchError
		require.ErrorAs(t, err, &km)
		require.Equal(t, detect.KeyMismatchError{Topic: e.events, Partition: 0, Offset: 15, RecordKey: "", AccessKey: "key:0"}, *km)
		require.Contains(t, err.Error(), "events topic "+e.events+" partition 0 offset 15: ")
		require.Contains(t, err.Error(), "detect.keyed is true; set detect.keyed: false")

		want := oracle(t, pipeline.Source{Topic: e.events, Partition: 0, Partitions: 2, Keyed: true}, pipeline.Start{Offset: 0}, false, before...)
		require.Positive(t, want.Offset, "window 0 acknowledged moves the commit")
		require.Less(t, want.Offset, int64(15))
		c := committed(t, e.seeds, e.group, e.events)
		require.Equal(t, want.Offset, c[0].At, "partition 0 committed where its keyed records put it, not past the refused one")
		require.Equal(t, want.Metadata, c[0].Metadata)

		for _, r := range readAll(t, e.seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			require.Equal(t, base, rep.StartMs, "only window 0, before the refused record, may be reported")
		}
		require.EqualValues(t, 1, mismatches(t, reg, e.events))
		require.Len(t, lines(log.String(), `level=INFO msg="events topic keyed by access key.* topic=`+e.events+` keyed=true setting=true why="configured`), 1, log.String())
	})
}
