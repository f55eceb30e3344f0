package member

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
)

// groupMember is a group member of a new topic of a kfake cluster.
type groupMember struct {
	seeds        []string
	group, topic string
	cl           *kgo.Client
}

// joined returns a member that was assigned every partition of a new
// topic, and polls no more: the test commits in that generation.
func joined(t *testing.T, partitions int32) groupMember {
	t.Helper()
	seeds := testenv.KFake(t)
	topic := testenv.NewTopic(t, seeds, partitions)
	group := testenv.UniqueName(t, "g")
	assigned := make(chan struct{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { close(assigned) }))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		cl.PollFetches(pctx)
		pcancel()
		cl.AllowRebalance()
		select {
		case <-assigned:
			return groupMember{seeds, group, topic, cl}
		case <-ctx.Done():
			t.Fatal("never assigned")
		default:
		}
	}
}

func fetched(t *testing.T, seeds []string, group string) map[TP]Point {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	os, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	require.NoError(t, err)
	out := map[TP]Point{}
	os.Each(func(o kadm.OffsetResponse) {
		require.NoError(t, o.Err)
		out[TP{o.Topic, o.Partition}] = Point{Offset: o.At, Metadata: o.Metadata}
	})
	return out
}

func TestCommitterCarriesMetadataAndNeverMovesBack(t *testing.T) {
	m := joined(t, 2)
	seeds, group, topic, cl := m.seeds, m.group, m.topic, m.cl
	ok := prometheus.NewCounter(prometheus.CounterOpts{Name: "ok"})
	failed := prometheus.NewCounter(prometheus.CounterOpts{Name: "failed"})
	c := NewCommitter(CommitterConfig{OK: ok, Failed: failed})
	ctx := context.Background()
	p0, p1 := TP{topic, 0}, TP{topic, 1}

	got := c.Commit(ctx, cl, map[TP]Point{p0: {10, "m0"}, p1: {20, "m1"}})
	require.Equal(t, map[TP]Point{p0: {10, "m0"}, p1: {20, "m1"}}, got)
	require.Equal(t, map[TP]Point{p0: {10, "m0"}, p1: {20, "m1"}}, fetched(t, seeds, group), "each partition with its own metadata")
	last, has := c.Last(p0)
	require.True(t, has)
	require.Equal(t, Point{10, "m0"}, last)

	// Back, or the same again: nothing is sent.
	require.Empty(t, c.Commit(ctx, cl, map[TP]Point{p0: {9, "back"}, p1: {20, "m1"}}))
	require.Equal(t, map[TP]Point{p0: {10, "m0"}, p1: {20, "m1"}}, fetched(t, seeds, group), "a commit never moves back")

	// The same offset with new metadata moves on; so does a later offset.
	got = c.Commit(ctx, cl, map[TP]Point{p0: {10, "m0b"}, p1: {25, "m1b"}})
	require.Equal(t, map[TP]Point{p0: {10, "m0b"}, p1: {25, "m1b"}}, got)
	require.Equal(t, got, fetched(t, seeds, group))
	require.Equal(t, 4.0, testutil.ToFloat64(ok))
	require.Equal(t, 0.0, testutil.ToFloat64(failed))

	// A seeded commit (the one fetched at the assignment) holds too.
	c.Seed(p1, Point{30, "fetched"})
	require.Empty(t, c.Commit(ctx, cl, map[TP]Point{p1: {26, "x"}}))
	// Forgotten (given up and assigned again): a new owner's points go.
	c.Forget(p1)
	_, has = c.Last(p1)
	require.False(t, has)
	require.Equal(t, map[TP]Point{p1: {26, "x"}}, c.Commit(ctx, cl, map[TP]Point{p1: {26, "x"}}))
}

// A commit the broker refuses is counted, logged and not recorded, so the
// next Commit tries it again.
func TestCommitterFailureIsNotRecorded(t *testing.T) {
	m := joined(t, 1)
	failed := prometheus.NewCounter(prometheus.CounterOpts{Name: "failed"})
	c := NewCommitter(CommitterConfig{Failed: failed})
	seeds, group, topic, cl := m.seeds, m.group, m.topic, m.cl
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := TP{topic, 0}
	require.Empty(t, c.Commit(ctx, cl, map[TP]Point{p: {5, "m"}}))
	require.Equal(t, 1.0, testutil.ToFloat64(failed))
	_, has := c.Last(p)
	require.False(t, has, "a failed commit is not the last commit")
	require.Empty(t, fetched(t, seeds, group))
	require.Equal(t, map[TP]Point{p: {5, "m"}}, c.Commit(context.Background(), cl, map[TP]Point{p: {5, "m"}}))
}
