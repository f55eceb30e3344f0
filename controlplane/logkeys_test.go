package controlplane_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/internal/testenv"
)

// TestLogsRawKeys: with LogRawKeys, the line a promotion logs shows the
// key itself beside its hash (TestLogsCarryNoSecrets: by default, the
// hash alone).
func TestLogsRawKeys(t *testing.T) {
	r := newRegistry(t, 1)
	f := r.follower()
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a := r.server(f, controlplane.Config{Token: token, Logger: log, LogRawKeys: true})
	const key = "customer:raw-key-51c0"
	a.promote("shop", key, controlplane.PromoteRequest{Mitigation: "split", SplitFactor: 4, TTL: "1m", By: "alice"})
	require.Contains(t, logs.String(), "app=shop key="+key+" key_hash="+hexHash(key)+" ")
}
