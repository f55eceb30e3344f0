package controlplane_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
)

// heldPromote is a registry on a kfake cluster of the test's own, and
// server A, whose producer's next produce request the broker holds in
// flight: A's promote is answered 503 when its client gives up, and is
// written when the test releases it.
type heldPromote struct {
	r       *registry
	f       *hotkeys.Follower
	a       *controlplane.Server
	adm     *kadm.Client
	held    chan struct{}
	release func()
}

// newHeldPromote builds the registry and server A; A's clock is now
// shifted by aClockShift (0: the wall clock).
func newHeldPromote(t *testing.T, aClockShift time.Duration) *heldPromote {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	r := openRegistry(t, c.ListenAddrs(), 1)
	h := &heldPromote{r: r, f: r.follower(), adm: kadm.NewClient(r.cl), held: make(chan struct{})}

	// A's own producer, warmed up (producer ID, metadata) so that the next
	// produce request the broker sees is the promote's.
	pa, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(pa.Close)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	warm := bulkHot("warm", "a", 1)
	warm.Topic = r.topic
	require.NoError(t, pa.ProduceSync(ctx, warm).FirstErr())
	r.produce(bulkHot("warm", "b", 1)) // r.cl, the other servers' producer, warmed up too
	// The publish timeout is no factor: the request's own context ends
	// (the client gives up) once the record is in flight.
	h.a, err = controlplane.NewWithClock(controlplane.Config{Follower: h.f, Producer: pa, Topic: r.topic, Token: token,
		PublishTimeout: hangGuard}, func() time.Time { return time.Now().Add(aClockShift) })
	require.NoError(t, err)
	t.Cleanup(h.a.Close)

	release := make(chan struct{})
	var releaseOnce, first sync.Once
	h.release = func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(h.release)
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		// Hold the first produce request only; the control function runs
		// for the others too (also while the first sleeps).
		isFirst := false
		first.Do(func() { isFirst = true })
		if !isFirst {
			c.DropControl()
			return nil, nil, false
		}
		close(h.held)
		c.SleepControl(func() { <-release })
		return nil, nil, false // then the broker handles it as usual
	})
	return h
}

// promoteUnacknowledged promotes key of app "shop" through A and returns
// A's answer, a 503: A's client gives up once the record is in flight.
func (h *heldPromote) promoteUnacknowledged(t *testing.T, key, ttl string) {
	t.Helper()
	ctx, giveUp := context.WithTimeout(context.Background(), hangGuard)
	defer giveUp()
	answered := make(chan *httpRecorder, 1)
	body := promoteBody(t, controlplane.PromoteRequest{App: "shop", Mitigation: "local_cache", TTL: ttl})
	go func() {
		req := newRequest("POST", "/api/hotkeys/"+keyPath(key)+"/promote", body).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := newRecorder()
		h.a.ServeHTTP(rec, req)
		answered <- rec
	}()
	select {
	case <-h.held: // the promote's record reached the broker and is in flight
	case <-ctx.Done():
		t.Fatal("gave up waiting (hang guard) for the promote's produce request")
	}
	giveUp()
	rec := <-answered
	// Changes made within one millisecond are concurrent (either may
	// rule): the change the test makes next comes in a later one than
	// the promote's stamp, which A made before it answered.
	waitNextMilli(time.Now())
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "%s", rec.Body)
	require.Contains(t, rec.Body.String(), "retrying is safe")
}

// landAfter releases A's held promote and waits until it is written after
// offset, then until the follower applied it.
func (h *heldPromote) landAfter(t *testing.T, offset int64) {
	t.Helper()
	h.release()
	testenv.Eventually(t, "A's held promote is written", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		ends, err := h.adm.ListEndOffsets(ctx, h.r.topic)
		if err != nil {
			return false
		}
		o, ok := ends.Lookup(h.r.topic, 0)
		return ok && o.Err == nil && o.Offset > offset+1
	})
	h.r.barrier(h.f)
}

// TestUnacknowledgedChangeLandsLast: a promote through server A is held
// in flight by the broker (as a stalled broker or a slow link holds it)
// until A's client gives up (503); the operator then demotes the key
// through server B, which Kafka acknowledges; then A's record lands. The
// demote, made last, rules: followers order a key's manual entries by
// created_ms, not by the order they read them.
func TestUnacknowledgedChangeLandsLast(t *testing.T) {
	h := newHeldPromote(t, 0)
	b := h.r.server(h.f, controlplane.Config{Token: token})
	h.promoteUnacknowledged(t, "product:42", "10m")
	dem := b.demote("shop", "product:42", "10m")
	h.landAfter(t, dem.Offset)

	// What the last acknowledged change says: the key is not hot.
	e, hot := h.f.Get("shop", "product:42")
	require.False(t, hot, "the key is hot (%v, %v) after a demote acknowledged at offset %d: "+
		"the promote answered 503 before it was written after the demote and replaced it", e.Source, e.Mitigation, dem.Offset)
	_, listed := b.listed("shop", "product:42")
	require.False(t, listed)
}

// TestRetriedPromoteEndedByItsOriginal: the retry a 503 invites, of the
// very same promote, through another instance. The original stays in
// flight through an outage longer than its TTL (A's clock, set 20 minutes
// back, stands for those 20 minutes: created_ms is what A stamped when the
// request came) and lands after the retry. It is older than the retry, so
// it changes nothing: the retry's promote keeps its ten minutes.
func TestRetriedPromoteEndedByItsOriginal(t *testing.T) {
	h := newHeldPromote(t, -20*time.Minute)
	b := h.r.server(h.f, controlplane.Config{Token: token})
	h.promoteUnacknowledged(t, "product:42", "10m")
	retry := b.promote("shop", "product:42", controlplane.PromoteRequest{Mitigation: "local_cache", TTL: "10m"})
	testenv.Eventually(t, "the retry is applied", func() bool { return h.f.IsHot("shop", "product:42") })
	h.landAfter(t, retry.Offset)

	require.True(t, time.Now().Before(retry.Expires), "the retry's TTL ran out on its own; the check says nothing")
	e, hot := h.f.Get("shop", "product:42")
	require.True(t, hot, "the retried promote, acknowledged until %v, was ended by its original landing late", retry.Expires)
	require.True(t, e.Expires.Equal(retry.Expires), "expires %v, the retry's %v", e.Expires, retry.Expires)
}

// TestManualOrderNeedsKeyPartitioner: keys each promoted three times and
// then demoted, every change acknowledged before the next, through a
// producer that does not partition by record key (round robin over three
// partitions), are found demoted by a follower started afterwards (an
// application restarting), which reads the partitions in its own order:
// either New refuses such a producer or created_ms ordering makes the
// demotes hold.
func TestManualOrderNeedsKeyPartitioner(t *testing.T) {
	t.Run("kfake", func(t *testing.T) { testManualOrderNeedsKeyPartitioner(t, newRegistry(t, 3)) })
	t.Run("real_kafka", func(t *testing.T) {
		testManualOrderNeedsKeyPartitioner(t, openRegistry(t, testenv.KafkaSeeds(t), 3))
	})
}

func testManualOrderNeedsKeyPartitioner(t *testing.T, r *registry) {
	live := r.follower()
	rr, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	t.Cleanup(rr.Close)
	s, err := controlplane.New(controlplane.Config{Follower: live, Producer: rr, Topic: r.topic, Token: token})
	if err != nil {
		t.Logf("New refuses a producer that does not partition by key: %v", err)
		return
	}
	s.Close()
	a := serve(t, controlplane.Config{Follower: live, Producer: rr, Topic: r.topic, Token: token})

	keys := []string{"k1", "k2", "k3", "k4", "k5", "k6"}
	// Across partitions, changes are ordered by created_ms: changes of
	// one key a millisecond apart at least, as people make them.
	for _, k := range keys {
		for range 3 {
			a.promote("shop", k, controlplane.PromoteRequest{Mitigation: "coalesce", TTL: "10m"})
			time.Sleep(2 * time.Millisecond)
		}
		a.demote("shop", k, "10m")
	}
	fresh := r.follower()
	r.barrier(live, fresh)
	for name, f := range map[string]*hotkeys.Follower{"the live follower": live, "a follower started afterwards": fresh} {
		var wrong []string
		for _, k := range keys {
			if f.IsHot("shop", k) {
				wrong = append(wrong, k)
			}
		}
		require.Empty(t, wrong, "%s: keys demoted last are hot (promoted)", name)
	}
}

// waitNextMilli returns once the wall clock is past t's millisecond.
func waitNextMilli(t time.Time) {
	for time.Now().UnixMilli() <= t.UnixMilli() {
		time.Sleep(100 * time.Microsecond)
	}
}
