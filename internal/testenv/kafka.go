package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
	adm := newAdmin(t, seeds)
	topic := UniqueName(t, "t")

	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s with %d partitions on %v: %v", topic, partitions, seeds, err)
	}

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
