package ingest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// rawLine is line i of a raw topic: a JSON access line, except every 17th
// which is garbage for the DLQ.
func rawLine(i int) string {
	if i%17 == 5 {
		return "garbage " + strconv.Itoa(i)
	}
	return fmt.Sprintf(`{"key":"k%d","bytes":%d,"time":%d}`+"\n", i%23, i, 1742220131000+int64(i))
}

// produceRaw writes lines [from, to) to topic, keyed by a made-up host so
// they are partitioned by host, not by access key.
func produceRaw(t *testing.T, seeds []string, topic string, from, to int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer cl.Close()
	recs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Key: []byte("host-" + strconv.Itoa(i%5)), Value: []byte(rawLine(i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

type topicRun struct {
	src    *Topic
	pl     *LineSender
	cancel context.CancelFunc
	done   chan error
}

func startTopic(t *testing.T, k *kafkaEnv, raw, group string) *topicRun {
	t.Helper()
	parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes", Time: "time", TimeFormat: "unix_ms"}, "raw")
	require.NoError(t, err)
	pl := lineSender(t, k.producer(t, schemas.Binary), parser, LineOptions{})
	src, err := NewTopic(TopicConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(k.seeds...), kgo.FetchMaxWait(50 * time.Millisecond)},
		TopicOptions: TopicOptions{Topics: []string{raw}, Group: group, CommitInterval: 20 * time.Millisecond}, MaxPollRecords: 500}, pl)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &topicRun{src: src, pl: pl, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- src.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *topicRun) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	require.NoError(t, <-r.done)
}

func (r *topicRun) acked() int64 { s := r.pl.Stats(); return s.Events.Load() + s.DLQ.Load() }

// checkRepublished reads the events and DLQ topics and checks that raw
// lines [0, n) are there exactly once each: good lines as events keyed by
// access key, garbage as dead letters naming topic:partition@offset, every
// record with the id raw/partition/offset.
func checkRepublished(t *testing.T, k *kafkaEnv, raw string, n int) {
	t.Helper()
	ids := map[string]bool{}
	seen := map[int]int{} // line number -> times seen
	for _, r := range readAll(t, k.seeds, k.events) {
		var e schemas.AccessEvent
		require.NoError(t, schemas.DecodeAny(r.Value, &e))
		require.Equal(t, e.Key, string(r.Key), "record key is the access key")
		require.Equal(t, 1742220131000+e.Bytes, e.TimeMs, "time comes from the line")
		id := header(r, schemas.HeaderRecordID)
		rid, err := schemas.ParseRecordID(id)
		require.NoError(t, err)
		require.Equal(t, schemas.IDTopic, rid.Kind, "id %q", id)
		require.Equal(t, raw, rid.Topic, "id %q", id)
		require.False(t, ids[id], "id %s twice on the events topic", id)
		ids[id] = true
		seen[int(e.Bytes)]++
	}
	for _, r := range readAll(t, k.seeds, k.dlq) {
		var d schemas.DeadLetter
		require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
		require.Equal(t, schemas.ReasonParse, d.Reason)
		id := header(r, schemas.HeaderRecordID)
		require.False(t, ids[id], "id %s twice", id)
		ids[id] = true
		// The id and the dead letter's source name the same record.
		rid, err := schemas.ParseRecordID(id)
		require.NoError(t, err)
		require.Equal(t, schemas.IDTopic, rid.Kind, "id %q", id)
		require.Equal(t, schemas.KafkaSource(raw, rid.Partition, rid.Offset), d.Source)
		i := atoi(t, strings.TrimPrefix(string(d.Raw), "garbage "))
		require.Equal(t, rawLine(i), string(d.Raw))
		seen[i]++
	}
	for i := range n {
		require.Equal(t, 1, seen[i], "raw line %d republished %d times", i, seen[i])
	}
	require.Len(t, seen, n)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	i, err := strconv.Atoi(s)
	require.NoError(t, err)
	return i
}

// requireCommittedAtEnd checks the group committed every partition of raw
// up to its end: nothing is left to re-send.
func requireCommittedAtEnd(t *testing.T, seeds []string, raw, group string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, raw)
	require.NoError(t, err)
	committed, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			return // no host hashed here: nothing to commit
		}
		c, ok := committed.Lookup(raw, o.Partition)
		require.True(t, ok, "partition %d has no committed offset", o.Partition)
		require.Equal(t, o.Offset, c.At, "partition %d committed below its end", o.Partition)
	})
}

// TestTopicSource re-publishes a raw topic partitioned by host, stops,
// and resumes with the same group after more lines arrive: every raw
// record is on the events topic or the DLQ exactly once, and the group's
// offsets end at the raw topic's end.
func TestTopicSource(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 3)
		raw := testenv.NewTopic(t, seeds, 4)
		group := testenv.UniqueName(t, "g")
		const first, second = 2000, 3000

		produceRaw(t, seeds, raw, 0, first)
		r := startTopic(t, k, raw, group)
		testenv.Eventually(t, "first lines acknowledged", func() bool { return r.acked() == first })
		r.stop(t)
		require.EqualValues(t, first, r.pl.Stats().Lines.Load(), "nothing read twice")
		requireCommittedAtEnd(t, seeds, raw, group)

		produceRaw(t, seeds, raw, first, second)
		r = startTopic(t, k, raw, group)
		testenv.Eventually(t, "new lines acknowledged", func() bool { return r.acked() == second-first })
		r.stop(t)
		require.EqualValues(t, second-first, r.pl.Stats().Lines.Load(), "a restart resumes at the committed offsets")
		requireCommittedAtEnd(t, seeds, raw, group)
		checkRepublished(t, k, raw, second)
	})
}

// TestTopicRebalance starts a second member while the first is reading:
// the first flushes and commits what it hands over, so the second resumes
// exactly there and no record is re-published.
func TestTopicRebalance(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 3)
		raw := testenv.NewTopic(t, seeds, 4)
		group := testenv.UniqueName(t, "g")
		n := 2000
		produceRaw(t, seeds, raw, 0, n)
		a := startTopic(t, k, raw, group)
		testenv.Eventually(t, "first member reading", func() bool { return a.acked() > 0 })
		b := startTopic(t, k, raw, group)
		// Keep lines coming until the second member has published some: it
		// then owns partitions the first one was revoked.
		for b.acked() == 0 {
			require.Less(t, n, 200_000, "the second member never got a partition")
			produceRaw(t, seeds, raw, n, n+100)
			n += 100
			time.Sleep(50 * time.Millisecond)
		}
		testenv.Eventually(t, "all lines acknowledged", func() bool { return a.acked()+b.acked() >= int64(n) })
		a.stop(t)
		b.stop(t)
		requireCommittedAtEnd(t, seeds, raw, group)
		checkRepublished(t, k, raw, n)
	})
}

// TestTopicStopUndelivered: stopped while Kafka does not answer its
// produce requests, the topic source waits StopTimeout, commits only what
// was acknowledged, and returns an *UndeliveredError counting the records
// read and not delivered: the group's offsets are before them, so the next
// start sends them.
func TestTopicStopUndelivered(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	seeds := c.ListenAddrs()
	k := newKafkaEnv(t, seeds, 2)
	raw := testenv.NewTopic(t, seeds, 2)
	produceRaw(t, seeds, raw, 0, 300)
	// From now on produce requests get no answer.
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, nil, true
	})
	parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes"}, "raw")
	require.NoError(t, err)
	pl := lineSender(t, k.producer(t, schemas.Binary), parser, LineOptions{})
	src, err := NewTopic(TopicConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.FetchMaxWait(50 * time.Millisecond)},
		TopicOptions: TopicOptions{Topics: []string{raw}, Group: testenv.UniqueName(t, "g")}, StopTimeout: 200 * time.Millisecond}, pl)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	testenv.Eventually(t, "300 records read", func() bool { return pl.stats.Lines.Load() == 300 })
	cancel()
	err = <-done
	var ue *UndeliveredError
	require.ErrorAs(t, err, &ue)
	require.EqualValues(t, 300, ue.Lines)
	require.Contains(t, err.Error(), "the next start reads and sends them again")
	require.EqualValues(t, 300, pl.stats.Undelivered.Load())
	require.Zero(t, pl.stats.Delivered.Load())
	require.Zero(t, pl.stats.Failed.Load(), "not sent is not refused")
}
