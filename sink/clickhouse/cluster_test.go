package clickhouse

import (
	"context"
	"testing"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestClickHouseClusterAlert: a cluster alert keeps its partition -1,
// the partitions it sums and its error; a partition's own alert reads an
// empty list and 0.
func TestClickHouseClusterAlert(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	conn, db := testDB(t)
	w, err := Open(ctx, testOptions(testenv.ClickHouseAddr(t), db), Deps{Logger: testLogger(t)})
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Close(ctx)) }()
	a := newAcks()
	cl := &schemas.HotKeyEvent{Version: 1, ID: "c", Type: schemas.HotKeyHot, App: "web", Key: "/hot",
		Partition: schemas.ClusterPartition, Partitions: []int32{0, 2, 5}, Count: 1502, Error: 42, OnsetMs: fixtureBaseMs}
	own := &schemas.HotKeyEvent{Version: 1, ID: "p", Type: schemas.HotKeyHot, App: "web", Key: "/x", Partition: 3, OnsetMs: fixtureBaseMs}
	require.NoError(t, w.WriteHotKey(ctx, cl, a.fn("c")))
	require.NoError(t, w.WriteHotKey(ctx, own, a.fn("p")))
	a.wait(t, 2)
	for _, h := range []*schemas.HotKeyEvent{cl, own} {
		var part int32
		var parts []int32
		var errN uint64
		require.NoError(t, conn.QueryRow(ctx, "SELECT partition, partitions, error FROM "+db+".hotkey_events FINAL WHERE id = @id",
			chgo.Named("id", h.ID)).Scan(&part, &parts, &errN))
		want := h.Partitions
		if want == nil {
			want = []int32{}
		}
		require.Equal(t, []any{h.Partition, want, h.Error}, []any{part, parts, errN})
	}
}
