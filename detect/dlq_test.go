package detect_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// logTo makes cfg log at INFO into a buffer the test reads, shown when the
// test fails.
func logTo(t *testing.T, cfg *detect.Config) *testenv.SyncBuffer {
	t.Helper()
	log := &testenv.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service log:\n%s", log)
		}
	})
	return log
}

// runExitAtEnd runs cfg as an exit-at-end batch and returns Run's result.
func runExitAtEnd(t *testing.T, cfg detect.Config) error {
	t.Helper()
	cfg.ExitAtEnd = true
	svc, err := detect.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	return svc.Run(ctx)
}

// keptTopic replaces e's events topic with one that never deletes by age:
// on a real broker, records stamped ten months ago would otherwise be
// due for deletion at the next retention check.
func keptTopic(t *testing.T, e *env) {
	t.Helper()
	e.events = testenv.NewTopicWithConfigs(t, e.seeds, e.parts, map[string]string{"retention.ms": "-1"})
}

// TestBackfillOfOldEvents: an exit-at-end run detects events from ten
// months ago with the default events.max_skew, whether their records were
// produced back then (a topic read long after it was written) or produced
// now (old logs ingested today with events.max_skew 0): it judges an
// event's time against its record's Kafka timestamp, and an old event
// harms nothing. An event far ahead of its record still goes to the DLQ,
// as time_skew.
func TestBackfillOfOldEvents(t *testing.T) {
	tenMonthsAgo := time.Now().AddDate(0, -10, 0).Truncate(time.Second)
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		for _, tc := range []struct {
			name     string
			produced func(eventTime time.Time) time.Time
		}{
			{"produced back then", func(et time.Time) time.Time { return et }},
			{"produced now", func(time.Time) time.Time { return time.Now() }},
		} {
			t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
				e := newEnv(t, seeds, 1)
				keptTopic(t, e)
				const n = 300
				var recs []*kgo.Record
				for i := range n {
					et := tenMonthsAgo.Add(time.Duration(i) * 10 * time.Millisecond)
					recs = append(recs, stamped(e.events, fmt.Sprintf("k%d", i%7), et.UnixMilli(), tc.produced(et)))
				}
				// Microseconds read as milliseconds: decades ahead of
				// any record.
				last := tenMonthsAgo.Add(n * 10 * time.Millisecond)
				recs = append(recs, stamped(e.events, "future", last.UnixMilli()*1000, tc.produced(last)))
				produce(t, seeds, recs...)

				cfg := e.config(t)
				require.Equal(t, schemas.DefaultMaxSkew, cfg.Limits.MaxSkew, "the default limits")
				log := logTo(t, &cfg)
				require.NoError(t, runExitAtEnd(t, cfg))

				events, keys, _ := windowKeys(t, e)
				require.EqualValues(t, n, events, "every old event is in a window")
				require.NotContains(t, keys, "future")
				dlq := readAll(t, seeds, e.dlq)
				require.Len(t, dlq, 1, "only the event ahead of its record is dead-lettered")
				var d schemas.DeadLetter
				require.NoError(t, schemas.DecodeDeadLetter(dlq[0].Value, &d))
				require.Equal(t, schemas.ReasonTimeSkew, d.Reason)
				require.Contains(t, d.Detail, "ahead of its record's Kafka timestamp")
				require.Contains(t, log.String(), fmt.Sprintf(`msg="records read" records=%d events=%d skipped=0 dlq=1 dlq_share=0.3%% dlq_reasons.time_skew=1 dlq_topic=%s`, n+1, n, e.dlq))
				require.NotContains(t, log.String(), "most of what was read went to the DLQ")
			})
		}
	})
}

// junk is a topic's worth of records of which most are unusable: 1,000
// records, the last 171 good events, before them 829 dead letters, 664
// that are not events at all and 165 with a key over the limit.
func junk(topic string, baseMs int64) []*kgo.Record {
	var recs []*kgo.Record
	for i := range 1000 {
		key := fmt.Sprintf("key:%d", i%50)
		e := schemas.AccessEvent{TimeMs: baseMs + int64(i), Key: key, App: "shop", Op: "GET"}
		switch {
		case i >= 829:
		case i%5 == 4:
			e.Key = strings.Repeat("k", schemas.DefaultMaxKeyBytes+1)
		default:
			recs = append(recs, raw(topic, 0, fmt.Appendf(nil, "GET /item/%d HTTP/1.1", i)))
			continue
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(e.Key), Value: schemas.AppendJSON(nil, &e)})
	}
	return recs
}

// TestDeadLetterSummary: a run over a topic of mostly junk says at its end
// how many records went to the DLQ, why, and what share of what it read
// that was; and, since that was most of it, warns, naming the setting
// for the dominant reason. The run still ends well: some events were
// detected.
func TestDeadLetterSummary(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		produce(t, e.seeds, junk(e.events, time.Now().Add(-time.Minute).UnixMilli())...)
		cfg := e.config(t)
		log := logTo(t, &cfg)
		require.NoError(t, runExitAtEnd(t, cfg), "some events were detected: the run succeeded")

		byReason := map[schemas.Reason]int{}
		for _, r := range readAll(t, e.seeds, e.dlq) {
			var d schemas.DeadLetter
			require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
			byReason[d.Reason]++
		}
		require.Equal(t, map[schemas.Reason]int{schemas.ReasonParse: 664, schemas.ReasonKeyTooLong: 165}, byReason)
		events, _, _ := windowKeys(t, e)
		require.EqualValues(t, 171, events)

		out := log.String()
		require.Contains(t, out, `level=INFO msg="records read" records=1000 events=171 skipped=0 dlq=829 dlq_share=82.9% `+
			`dlq_reasons.parse=664 dlq_reasons.key_too_long=165 dlq_topic=`+e.dlq+"\n")
		require.Regexp(t, `level=WARN msg="most of what was read went to the DLQ" dlq_topic=`+regexp.QuoteMeta(e.dlq)+
			` read=1000 dlq=829 dlq_share=82.9% reason=parse reason_dlq=664 fix=".*set detect\.format to their format`, out)
	})
}

// TestNothingDetected: an exit-at-end run whose every record went to the
// DLQ fails with a *NothingDetectedError that counts them by reason and
// names the setting, after warning in its log; a backfill script sees a
// non-zero exit instead of a silent run that reported nothing.
func TestNothingDetected(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		nowMs := time.Now().UnixMilli()
		var recs []*kgo.Record
		for i := range 200 {
			// In microseconds: decades ahead of when they were produced.
			recs = append(recs, event(e.events, int32(i%2), fmt.Sprintf("k%d", i), (nowMs+int64(i))*1000))
		}
		produce(t, e.seeds, recs...)
		cfg := e.config(t)
		log := logTo(t, &cfg)
		err := runExitAtEnd(t, cfg)
		var nd *detect.NothingDetectedError
		require.ErrorAs(t, err, &nd)
		require.EqualValues(t, 200, nd.Records)
		require.Equal(t, map[schemas.Reason]int64{schemas.ReasonTimeSkew: 200}, nd.DeadLetters)
		require.ErrorContains(t, err, "none of the 200 records read gave an event, so nothing was detected: 200 went to the DLQ "+e.dlq+" (time_skew 200)")
		require.ErrorContains(t, err, "events.max_skew")
		require.ErrorContains(t, err, "Group "+e.group+" has committed past them")
		require.Len(t, readAll(t, e.seeds, e.dlq), 200)
		require.Regexp(t, `level=WARN msg="most of what was read went to the DLQ" .* read=200 dlq=200 dlq_share=100.0% reason=time_skew reason_dlq=200 fix=".*events\.max_skew: 0`, log.String())
		for p, o := range committed(t, e.seeds, e.group, e.events) {
			require.EqualValues(t, 100, o.At, "partition %d committed past its dead letters", p)
		}
	})
}

// TestDeadLettersLoggedLive: a live run says what went to the DLQ every
// few seconds, but only when more did, and once more when it stops.
func TestDeadLettersLoggedLive(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		cfg := e.config(t)
		m := startMember(t, cfg)
		m.waitLog(t, `msg="partitions assigned"`)
		baseMs := time.Now().Add(-time.Minute).UnixMilli()
		good := func(i int) *kgo.Record { return event(e.events, 0, fmt.Sprintf("k%d", i), baseMs+int64(i)) }
		// A junk record last: once its dead letter counts, so do the
		// records before it (they were handed over first), whichever
		// fetches brought them.
		produce(t, e.seeds, good(0), good(1), good(2), raw(e.events, 0, []byte("junk 1")))
		m.waitLog(t, `level=INFO msg="records sent to the DLQ so far" records=4 events=3 skipped=0 dlq=1 dlq_share=25.0% dlq_reasons.parse=1 dlq_topic=`)
		var more []*kgo.Record
		for i := range 4 {
			more = append(more, raw(e.events, 0, fmt.Appendf(nil, "junk %d", i+2)))
		}
		produce(t, e.seeds, more...)
		m.waitLog(t, `level=WARN msg="records sent to the DLQ so far; most of what was read" records=8 events=3 skipped=0 dlq=5 dlq_share=62.5% dlq_reasons.parse=5 dlq_topic=\S+ fix=".*detect\.format`)
		require.NoError(t, m.stop(t))
		out := m.log.String()
		require.Contains(t, out, `msg="records read" records=8 events=3 skipped=0 dlq=5 dlq_share=62.5% dlq_reasons.parse=5`)
		// A line comes only when more went to the DLQ: never two with
		// the same count, however the ticks fell.
		seen := map[string]bool{}
		for _, l := range regexp.MustCompile(`msg="records sent to the DLQ so far[^"]*" .* dlq=(\d+) `).FindAllStringSubmatch(out, -1) {
			require.False(t, seen[l[1]], "said twice that %s records went to the DLQ:\n%s", l[1], out)
			seen[l[1]] = true
		}
	})
}

// TestLiveRunJudgesTimesByItsClock: a live run checks event times against
// the wall clock, as ingest does, whatever their records' timestamps: its
// idle partitions' windows close by that clock, and one whose events were
// ten months old would close every window since. It dead-letters them
// and, since they are most of what it read, points to --exit-at-end.
func TestLiveRunJudgesTimesByItsClock(t *testing.T) {
	tenMonthsAgo := time.Now().AddDate(0, -10, 0).Truncate(time.Second)
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 1)
		keptTopic(t, e)
		m := startMember(t, e.config(t))
		m.waitLog(t, `msg="partitions assigned"`)
		produce(t, e.seeds,
			stamped(e.events, "then", tenMonthsAgo.UnixMilli(), tenMonthsAgo),
			stamped(e.events, "now", tenMonthsAgo.UnixMilli()+1, time.Now()))
		m.waitLog(t, `level=WARN msg="records sent to the DLQ so far; most of what was read" records=2 events=0 skipped=0 dlq=2 dlq_share=100.0% `+
			`dlq_reasons.time_skew=2 dlq_topic=\S+ fix="a live run refuses event times further than events.max_skew from its clock: `+
			`read a backfill of old events with --exit-at-end`)
		require.NoError(t, m.stop(t), "a live run stopped is no failed batch")
		require.Contains(t, m.log.String(), `level=WARN msg="most of what was read went to the DLQ"`)
		dlq := readAll(t, e.seeds, e.dlq)
		require.Len(t, dlq, 2)
		for _, r := range dlq {
			var d schemas.DeadLetter
			require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
			require.Equal(t, schemas.ReasonTimeSkew, d.Reason)
			require.Contains(t, d.Detail, "from now")
		}
		events, _, _ := windowKeys(t, e)
		require.Zero(t, events)
	})
}
