package controlplane_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestClientsSumsDoNotWrap: one record with a huge counter (a hostile or
// broken client; Validate takes any uint64) must not make the sums over
// the clients smaller than one client's own counter, nor turn the hit
// ratio of a fleet that only hits into 0: sums saturate at the largest
// uint64, and ratios are computed in floating point.
func TestClientsSumsDoNotWrap(t *testing.T) {
	seeds := testenv.KFake(t)
	topic := statsTopic(t, seeds, 1)
	clk := &testClock{}
	c := newTestClients(t, seeds, topic, clk, nil)
	now := time.Now()
	good := clientStats("good", now, schemas.ClientStatsKey{App: "shop", Key: "k", Hits: 10, Misses: 2})
	huge := clientStats("huge", now, schemas.ClientStatsKey{App: "shop", Key: "k", Hits: math.MaxUint64, Misses: 1})
	huge.Cache.Hits, huge.Cache.Misses = math.MaxUint64, 1
	cl := statsProducer(t, seeds, topic)
	produceSync(t, cl, statsRecord(t, good), statsRecord(t, huge))
	waitClients(t, c, 2)
	clk.set(now)

	tot := c.Totals()
	require.Equal(t, 2, tot.Clients)
	require.GreaterOrEqual(t, tot.Hits, uint64(math.MaxUint64-1), "sum of hits %d is below one client's", tot.Hits)
	require.Greater(t, tot.HitRatio, 0.5, "hit ratio of clients that almost only hit")

	k := c.Key("shop", "k")
	require.Equal(t, 2, k.Clients)
	require.GreaterOrEqual(t, k.Hits, uint64(math.MaxUint64-1), "sum of the key's hits %d is below one client's", k.Hits)
	require.Greater(t, k.HitRatio, 0.5, "the key's hit ratio")
}
