package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/topics"
)

// adminTimeout bounds each admin request a helper makes, so a broker that
// stops answering fails the test with a message instead of hanging it until
// go test's global timeout.
const adminTimeout = 30 * time.Second

// KFake starts an in-process kfake cluster listening on 127.0.0.1 (random
// ports, so parallel tests never collide) and returns its broker addresses.
// opts are passed to [kfake.NewCluster] after testenv's defaults, so they
// win. The cluster is closed when the test ends.
//
// kfake speaks the Kafka protocol to any client, but it has no replication,
// quotas or per-record produce errors; tests of behaviour that depends on
// those need [KafkaSeeds] and the real broker.
func KFake(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	// Three brokers is kfake's own default; it keeps leadership spread so
	// a client really talks to several brokers, as against a real cluster.
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// NewTopic creates a topic with a name unique to this test run and the given
// number of partitions, on the cluster reached through seeds, and deletes it
// when the test ends. The replication factor is the broker's default (1 on
// the single-node test broker).
func NewTopic(t testing.TB, seeds []string, partitions int32) string {
	t.Helper()
	return NewTopicWithConfigs(t, seeds, partitions, nil)
}

// NewTopicWithConfigs is NewTopic for a topic created with configs, e.g.
// cleanup.policy: compact.
func NewTopicWithConfigs(t testing.TB, seeds []string, partitions int32, configs map[string]string) string {
	t.Helper()
	topic := UniqueName(t, "t")
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatalf("kafka client for %v: %v", seeds, err)
	}
	defer cl.Close()

	// Ensure also waits until every partition has a leader: a broker that
	// just started (as in CI) can take a moment after CreateTopics, and a
	// test that lists offsets or produces at once would fail on it.
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := topics.Ensure(ctx, cl, true, topics.Spec{Name: topic, Partitions: partitions, ReplicationFactor: -1, Configs: configs}); err != nil {
		t.Fatalf("create topic %s with %d partitions on %v: %v", topic, partitions, seeds, err)
	}

	adm := newAdmin(t, seeds)
	t.Cleanup(func() {
		// t.Context is already cancelled while cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		resps, err := adm.DeleteTopics(ctx, topic)
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			t.Errorf("delete topic %s: %v", topic, err)
		}
	})
	return topic
}

// newAdmin returns an admin client for seeds, closed when the test ends.
func newAdmin(t testing.TB, seeds []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatalf("kafka admin client for %v: %v", seeds, err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// ReadCommitted returns every record of topic up to its last stable
// offset, as a consumer with read_committed isolation sees them: the
// records of aborted transactions and the transaction markers are left
// out. It first waits, up to half a minute, for the transactions open on
// topic to end (a commit's markers land a moment after it returns); the
// records of one still open then are not reached.
func ReadCommitted(t testing.TB, seeds []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*adminTimeout)
	defer cancel()
	adm := newAdmin(t, seeds)
	// A transaction's commit returns before its markers are written: wait
	// (a while) until no transaction is open, so that one a test just
	// committed is counted.
	var ends kadm.ListedOffsets
	deadline := time.Now().Add(adminTimeout)
	for {
		var err error
		ends, err = adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil {
			t.Fatalf("list the last stable offsets of %s: %v", topic, err)
		}
		hw, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = hw.Error()
		}
		if err != nil {
			t.Fatalf("list the end offsets of %s: %v", topic, err)
		}
		open := false
		hw.Each(func(o kadm.ListedOffset) {
			if c, ok := ends.Lookup(topic, o.Partition); !ok || c.Offset < o.Offset {
				open = true
			}
		})
		if !open || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if len(want) == 0 {
		return nil
	}
	// With the markers kept, the record just below the last stable offset
	// always arrives (a marker follows every transaction, aborted ones
	// too), so the end is known by offset, not by counting records.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("kafka client for %v: %v", seeds, err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d records of %s; partitions not read to their end: %v", len(out), topic, want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
			if r.Offset < ends[topic][r.Partition].Offset && !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out
}

// EachBroker runs fn as two sub-tests: "kfake", against an in-process
// kfake cluster ([KFake]), and "real_kafka", against the real broker
// ([KafkaSeeds], skipped or failed as it says when the broker is not
// given).
func EachBroker(t *testing.T, fn func(t *testing.T, seeds []string)) {
	t.Helper()
	t.Run("kfake", func(t *testing.T) { fn(t, KFake(t)) })
	t.Run("real_kafka", func(t *testing.T) { fn(t, KafkaSeeds(t)) })
}
