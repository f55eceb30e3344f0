package smoke

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
)

const (
	numRecords    = 10_000
	numKeys       = 500 // 20 records per key: enough to see a key stay put
	numPartitions = 8
)

// TestKafkaProduceConsume produces numRecords keyed records with acks=all
// and idempotence, reads them back through a consumer group, and checks
// that each arrived exactly once, intact, in produce order per key, and
// that a key always lands on one partition. It runs against kfake and
// against the real broker, under sub-test names that say which.
func TestKafkaProduceConsume(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seeds func(testing.TB) []string
	}{
		{name: "kfake", seeds: func(t testing.TB) []string { return testenv.KFake(t) }},
		{name: "real_kafka", seeds: testenv.KafkaSeeds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds := tc.seeds(t)
			topic := testenv.NewTopic(t, seeds, numPartitions)
			produced := produce(t, seeds, topic)
			consumed := consume(t, seeds, topic, testenv.UniqueName(t, "g"))
			checkDelivery(t, produced, consumed)
		})
	}
}

// sent is what a test knows about one record: its key and value, and the
// partition and offset it ended up at.
type sent struct {
	key, value string
	partition  int32
	offset     int64
}

func produce(t *testing.T, seeds []string, topic string) []sent {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent writes are on by default with acks=all
	)
	require.NoError(t, err)
	t.Cleanup(cl.Close)

	rs := make([]*kgo.Record, numRecords)
	for i := range rs {
		rs[i] = &kgo.Record{
			Key:   fmt.Appendf(nil, "key-%03d", i%numKeys),
			Value: fmt.Appendf(nil, "value-%05d", i),
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr(), "produce %d records to %s", numRecords, topic)

	out := make([]sent, len(rs))
	for i, r := range rs {
		out[i] = sent{string(r.Key), string(r.Value), r.Partition, r.Offset}
	}
	return out
}

func consume(t *testing.T, seeds []string, topic, group string) []sent {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	require.NoError(t, err)
	t.Cleanup(cl.Close)

	var got []sent
	collect := func(ctx context.Context) {
		fs := cl.PollFetches(ctx)
		for _, fe := range fs.Errors() {
			// The deadline ending a poll is how the loops below stop.
			if ctx.Err() == nil {
				t.Fatalf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, sent{string(r.Key), string(r.Value), r.Partition, r.Offset})
		})
	}

	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	for len(got) < numRecords && ctx.Err() == nil {
		collect(ctx)
	}
	require.Len(t, got, numRecords, "records consumed from %s before the deadline", topic)

	// Everything produced has arrived; anything more would be a duplicate.
	// Give the group a moment to hand one over.
	idle, cancelIdle := context.WithTimeout(t.Context(), time.Second)
	defer cancelIdle()
	for idle.Err() == nil {
		collect(idle)
	}
	return got
}

func checkDelivery(t *testing.T, produced, consumed []sent) {
	t.Helper()
	require.Len(t, consumed, len(produced), "consumed records (duplicates included)")

	byValue := make(map[string]sent, len(produced))
	for _, p := range produced {
		byValue[p.value] = p
	}
	seen := make(map[string]bool, len(consumed))
	keyPartition := map[string]int32{}
	lastOffset := map[string]int64{}
	partitions := map[int32]bool{}
	for _, c := range consumed {
		p, ok := byValue[c.value]
		require.True(t, ok, "consumed a record never produced: %+v", c)
		require.False(t, seen[c.value], "consumed %q twice", c.value)
		seen[c.value] = true
		require.Equal(t, p, c, "record %q differs between produce and consume", c.value)

		if want, ok := keyPartition[c.key]; ok {
			require.Equal(t, want, c.partition, "key %q seen on two partitions", c.key)
		}
		keyPartition[c.key] = c.partition
		partitions[c.partition] = true

		// One partition, one producer: a key's records keep produce order.
		if last, ok := lastOffset[c.key]; ok {
			require.Greater(t, c.offset, last, "key %q consumed out of order", c.key)
		}
		lastOffset[c.key] = c.offset
	}
	require.Len(t, seen, len(produced), "distinct records consumed")
	require.Len(t, keyPartition, numKeys, "distinct keys consumed")
	require.Len(t, partitions, numPartitions, "partitions that received records (keys should spread)")
}
