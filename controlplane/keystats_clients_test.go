package controlplane_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/schemas"
)

// TestKeyStatsClients: with Config.Clients, a key's stats carry the sums
// of what the live clients' records say of it; without app they stay null.
func TestKeyStatsClients(t *testing.T) {
	reg := newRegistry(t, 1)
	f := reg.follower()
	topic := statsTopic(t, reg.seeds, 1)
	c := newTestClients(t, reg.seeds, topic, &testClock{}, nil)
	now := time.Now()
	produceSync(t, statsProducer(t, reg.seeds, topic),
		statsRecord(t, clientStats("web-1/10", now, schemas.ClientStatsKey{App: "shop", Key: "k/1", Hits: 90, Misses: 10, Loads: 2, Coalesced: 8})),
		statsRecord(t, clientStats("web-2/11", now, schemas.ClientStatsKey{App: "shop", Key: "k/1", Hits: 30, Misses: 10, Loads: 5, Coalesced: 5,
			SplitShards: 4, SplitWrites: 7, SplitReads: 3})))
	waitClients(t, c, 2)
	h := newHistory(t, controlplane.HistoryConfig{})
	a := reg.server(f, controlplane.Config{History: h, Clients: c})

	st := decode[controlplane.KeyStats](t, a.get("/api/hotkeys/k%2F1/stats?app=shop", http.StatusOK).body)
	require.NotNil(t, st.Clients)
	require.Equal(t, controlplane.ClientKeyStats{Clients: 2, Hits: 120, Misses: 20, HitRatio: 120.0 / 140, Loads: 7, Coalesced: 13,
		CollapseRatio: 20.0 / 7, SplitClients: 1, SplitShards: 4, SplitWrites: 7, SplitReads: 3}, *st.Clients)
	r := a.get("/api/hotkeys/k%2F1/stats", http.StatusOK)
	require.Equal(t, "null", string(jsonFields(t, r.body)["clients"]), "no app, no clients")
}
