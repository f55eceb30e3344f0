package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestRunBackfillOfOldLogs: `detect run --exit-at-end` over logs from ten
// months ago, ingested today, reports them with the default
// events.max_skew (it used to send every one to the DLQ as time_skew and
// exit 0 without a word), and says at the end what it read.
func TestRunBackfillOfOldLogs(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newRunEnv(t, seeds, testenv.NewTopicWithConfigs(t, seeds, 2, map[string]string{"retention.ms": "-1"}))
		base := time.Now().AddDate(0, -10, 0).Truncate(time.Second).UnixMilli()
		const n = 3000
		produceEvents(t, seeds, e.events, n, base, 1, 0, 100) // 3 s of event time, produced now
		p := start(t, nil, append([]string{"run", "--exit-at-end", "--print=json"}, e.flags("--events.max_skew=168h")...)...)
		require.Equal(t, 0, p.WaitExit())
		var events uint64
		for _, line := range strings.Split(p.Stdout.String(), "\n") {
			if strings.Contains(line, `"scope":"cluster"`) {
				rep, err := schemas.DecodeWindowReport([]byte(line))
				require.NoError(t, err)
				require.GreaterOrEqual(t, rep.StartMs, base)
				events += rep.Events
			}
		}
		require.EqualValues(t, n, events, "every old event reported")
		p.WaitStderr(fmt.Sprintf(`level=INFO msg="records read" records=%d events=%d skipped=0 dlq=0 dlq_topic=%s$`, n, n, e.dlq))
	})
}

// TestRunAllDeadLettered: an exit-at-end run over a topic whose every
// record goes to the DLQ warns, naming the setting, and exits 1 with an
// error that says what happened and what to do, so that a script running
// a backfill stops instead of going on with nothing reported.
func TestRunAllDeadLettered(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 1))
		nowMs := time.Now().UnixMilli()
		var recs []*kgo.Record
		for i := range 50 {
			ev := schemas.AccessEvent{TimeMs: nowMs + int64(i), Key: fmt.Sprintf("%d:%s", i, strings.Repeat("x", 100)), App: "shop"}
			recs = append(recs, &kgo.Record{Topic: e.events, Value: schemas.AppendJSON(nil, &ev)})
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx(t), recs...).FirstErr())
		cl.Close()

		p := start(t, nil, append([]string{"run", "--exit-at-end"}, e.flags("--events.max_key_bytes=64")...)...)
		require.Equal(t, 1, p.WaitExit(), "nothing was detected: exit 1")
		p.WaitStderr(`level=INFO msg="records read" records=50 events=0 skipped=0 dlq=50 dlq_share=100.0% dlq_reasons.key_too_long=50 dlq_topic=` + e.dlq + `$`)
		p.WaitStderr(`level=WARN msg="most of what was read went to the DLQ" dlq_topic=` + e.dlq + ` read=50 dlq=50 dlq_share=100.0% reason=key_too_long reason_dlq=50 fix="raise events.max_key_bytes`)
		p.WaitStderr(`^detect: none of the 50 records read gave an event, so nothing was detected: 50 went to the DLQ ` + e.dlq +
			` \(key_too_long 50\); raise events.max_key_bytes.*Group ` + e.group + ` has committed past them: run again with another detect.group, or reset its offsets$`)
		require.Len(t, readTopic(t, seeds, e.dlq), 50)
	})
}
