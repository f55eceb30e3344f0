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

// TestRunKeyedOnTopicNotKeyed: a topic written without record keys, as
// a log shipper writes it. `detect run --exit-at-end` with the default
// detect.keyed: auto says once, at INFO, that the topic is not keyed and
// why, and reports. With detect.keyed: true it exits 1 with an error
// naming the topic, partition, offset and the setting to change, and
// prints no report.
func TestRunKeyedOnTopicNotKeyed(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		events := testenv.NewTopic(t, seeds, 2)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		var recs []*kgo.Record
		for i := range 200 {
			ev := schemas.AccessEvent{TimeMs: base + int64(i)*10, Key: fmt.Sprintf("key:%d", i%7), App: "app", Op: "GET"}
			recs = append(recs, &kgo.Record{Topic: events, Partition: int32(i % 2), Value: schemas.AppendJSON(nil, &ev)})
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx(t), recs...).FirstErr())
		cl.Close()

		auto := newRunEnv(t, seeds, events)
		p := start(t, nil, append([]string{"run", "--exit-at-end", "--print=json"}, auto.flags()...)...)
		require.Equal(t, 0, p.WaitExit())
		said := p.Stderr.Match(regexpOf(`level=INFO msg="events topic not keyed by access key`))
		require.Len(t, said, 1, "once for the topic")
		require.Contains(t, said[0], ` topic=`+events+` keyed=false setting=auto why="the first record's key against its access key" partition=`)
		require.Regexp(t, `offset=0 record_key_hash=`+schemas.KeyHash("")+` access_key_hash=[0-9a-f]{16}$`, said[0],
			"keys by their hash: log.keys is hash by default")
		require.Empty(t, p.Stderr.Match(regexpOf(`level=INFO msg="events topic keyed by access key`)))
		require.Contains(t, p.Stdout.String(), `"scope":"cluster"`, "the auto run reports")

		forced := newRunEnv(t, seeds, events)
		p = start(t, nil, append([]string{"run", "--exit-at-end", "--print=json"}, forced.flags("--detect.keyed=true")...)...)
		require.Equal(t, 1, p.WaitExit(), "refused: exit 1")
		p.WaitStderr(`^detect: events topic ` + events + ` partition [01] offset 0: the record's key "" is not its access key "key:\d", ` +
			`but detect.keyed is true; set detect.keyed: false for a topic not keyed by access key .*Nothing from this offset on was counted or committed$`)
		require.False(t, strings.Contains(p.Stdout.String(), `"scope"`), "no report: %s", p.Stdout)
	})
}
