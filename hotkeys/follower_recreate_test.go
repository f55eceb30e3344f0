package hotkeys_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func (r *registry) deleteTopic() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	resp, err := kadm.NewClient(r.cl).DeleteTopics(ctx, r.topic)
	require.NoError(r.t, err)
	require.NoError(r.t, resp.Error())
}

// createTopic creates the registry topic again, compacted, with the given
// partitions.
func (r *registry) createTopic(partitions int32) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	compact := "compact"
	resp, err := kadm.NewClient(r.cl).CreateTopic(ctx, partitions, -1, map[string]*string{"cleanup.policy": &compact}, r.topic)
	require.NoError(r.t, err)
	require.NoError(r.t, resp.Err)
	// The writer's client would refuse the new topic: it holds the old
	// one's ID.
	r.cl.PurgeTopicsFromClient(r.topic)
}

// set is what a follower holds, by app and key.
func set(f *hotkeys.Follower) map[[2]string]hotkeys.Entry {
	m := map[[2]string]hotkeys.Entry{}
	for e := range f.All() {
		m[[2]string{e.App, e.Key}] = e
	}
	return m
}

// until writes a detector hot record of a fresh key and returns the
// changes reported before its own, the last one of each key: every change
// of the records applied before it.
func (c *changes) until(r *registry) map[string]hotkeys.Entry {
	c.t.Helper()
	c.barriers++
	key := "barrier-" + strconv.Itoa(c.barriers)
	r.produce(hotRecord("b", key, 1))
	m := map[string]hotkeys.Entry{}
	for e := c.next(); e.Key != key; e = c.next() {
		m[e.Key] = e
	}
	return m
}

// TestFollowerTopicRecreated: after the registry topic is deleted and
// created again, a running follower holds exactly what a fresh follower of
// the new topic holds, reports each old key cooled and each new one hot
// (a key both topics hold alike not at all), counts the fetch errors it
// met, and follows the new topic afterwards.
func TestFollowerTopicRecreated(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 2)
	for i := range 20 {
		r.produce(hotRecord("shop", "old-"+strconv.Itoa(i), 1))
	}
	r.produce(hotRecord("shop", "both", 7))
	reg := prometheus.NewRegistry()
	f := r.follower(hotkeys.FollowerConfig{Registerer: reg}, nil)
	c := watch(t, f)
	waitReady(t, f)
	require.Equal(t, 21, f.Stats().Entries)

	r.deleteTopic()
	r.createTopic(2)
	for i := range 30 {
		r.produce(hotRecord("shop", "new-"+strconv.Itoa(i), 1))
	}
	r.produce(hotRecord("shop", "both", 7))
	testenv.Eventually(t, "the follower to hold the recreated topic's keys", func() bool {
		st := f.Stats()
		return st.Entries == 31 && !st.Resyncing && f.IsHot("shop", "new-29") && !f.IsHot("shop", "old-0")
	})

	fresh := r.follower(hotkeys.FollowerConfig{}, nil)
	waitReady(t, fresh)
	require.Equal(t, set(fresh), set(f), "the follower holds what a fresh one does")

	got := c.until(r)
	for i := range 20 {
		k := "old-" + strconv.Itoa(i)
		require.Equal(t, hotkeys.StatusCooled, got[k].Status, "change of %s", k)
		delete(got, k)
	}
	for i := range 30 {
		k := "new-" + strconv.Itoa(i)
		require.Equal(t, hotkeys.StatusHot, got[k].Status, "change of %s", k)
		delete(got, k)
	}
	// "both" is reported if the resync began before the new topic had it
	// (it cooled with the set read to the listed offsets, then came back).
	if e, ok := got["both"]; ok {
		require.Equal(t, hotkeys.StatusHot, e.Status)
		delete(got, "both")
	}
	require.Empty(t, got, "changes of keys neither gone nor new")

	st := f.Stats()
	require.True(t, st.Ready)
	require.GreaterOrEqual(t, st.Resyncs, uint64(1))
	require.GreaterOrEqual(t, st.FetchErrors, uint64(1))
	require.Equal(t, float64(st.FetchErrors), gauge(t, reg, "keyheat_hotkeys_follower_fetch_errors_total"))
	require.Equal(t, float64(st.Resyncs), gauge(t, reg, "keyheat_hotkeys_follower_resyncs_total"))
	testenv.Eventually(t, "the follower to say it fetches again", func() bool { return !f.Stats().Failing })
	require.Zero(t, gauge(t, reg, "keyheat_hotkeys_follower_failing"))

	r.produce(&kgo.Record{Key: schemas.HotKeyRecordKey("shop", "new-0")})
	c.expect("new-0", hotkeys.StatusCooled)
}

// TestFollowerTopicDeleted: while the registry topic does not exist the
// follower keeps the set it had, says it is failing and fetches no more
// than its backoff allows; when the topic comes back it holds the new
// topic's keys.
func TestFollowerTopicDeleted(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 1)
	r.produce(hotRecord("shop", "old", 1))
	f := r.follower(hotkeys.FollowerConfig{}, nil)
	waitReady(t, f)

	r.deleteTopic()
	testenv.Eventually(t, "the follower to say it is failing", func() bool { return f.Stats().Failing })
	require.True(t, f.IsHot("shop", "old"), "a registry gone keeps the set")
	require.True(t, f.Ready())

	// Polls that fail are at least the backoff's 100ms apart, each with
	// one error on this one-partition topic: a slow machine polls less.
	// Without the backoff the client returns thousands a second.
	start, before := time.Now(), f.Stats().FetchErrors
	time.Sleep(time.Second)
	n, polls := f.Stats().FetchErrors-before, uint64(time.Since(start)/(100*time.Millisecond))+2
	require.LessOrEqual(t, n, polls, "fetch errors while the topic is gone: the follower does not back off")
	require.True(t, f.IsHot("shop", "old"))

	r.createTopic(1)
	r.produce(hotRecord("shop", "new", 1))
	testenv.Eventually(t, "the follower to hold the new topic's key", func() bool {
		return f.IsHot("shop", "new") && !f.IsHot("shop", "old") && !f.Stats().Resyncing
	})
	require.Equal(t, 1, f.Stats().Entries)
}

// TestFollowerTopicRecreatedNoTopicIDs: against a broker that reports no
// topic IDs the client cannot tell the topic was recreated; a new topic
// shorter than the old one sends it back to the start, below the
// follower's position, and the follower reads the new topic again.
func TestFollowerTopicRecreatedNoTopicIDs(t *testing.T) {
	noLeaks(t)
	r := newRegistry(t, 1)
	for i := range 20 {
		r.produce(hotRecord("shop", "old-"+strconv.Itoa(i), 1))
	}
	f := r.follower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.MaxVersions(kversion.V2_7_0())}}, nil)
	waitReady(t, f)

	r.deleteTopic()
	r.createTopic(1)
	for i := range 5 {
		r.produce(hotRecord("shop", "new-"+strconv.Itoa(i), 1))
	}
	testenv.Eventually(t, "the follower to hold the recreated topic's keys", func() bool {
		return f.Stats().Entries == 5 && f.IsHot("shop", "new-4") && !f.Stats().Resyncing
	})
	var keys []string
	for k := range set(f) {
		keys = append(keys, k[1])
	}
	require.ElementsMatch(t, []string{"new-0", "new-1", "new-2", "new-3", "new-4"}, keys)
}
