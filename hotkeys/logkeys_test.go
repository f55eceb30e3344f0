package hotkeys

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestCacheLogKeys: the cache's log line about a key names it by its
// key_hash only, and by the key itself too with LogRawKeys.
func TestCacheLogKeys(t *testing.T) {
	noLeaks(t)
	const key = "user:alice@example.com"
	for _, raw := range []bool{false, true} {
		var buf testenv.SyncBuffer
		c := newTestCache(t, CacheConfig{Registry: hotRegistry("a", key, MitigationLocalCache), SharedTTL: time.Hour,
			Logger: slog.New(slog.NewTextHandler(&buf, nil)), LogRawKeys: raw})
		_, err := c.Get(t.Context(), "a", key, func(context.Context) ([]byte, error) { panic("boom") })
		require.ErrorContains(t, err, "panicked: boom")
		out := buf.String()
		require.Contains(t, out, `msg="hot key load panicked" app=a `)
		require.Contains(t, out, "key_hash="+schemas.KeyHash(key)+" ")
		if raw {
			require.Contains(t, out, " key="+key+" key_hash=", "LogRawKeys shows the key")
		} else {
			require.NotContains(t, out, "alice", "a raw key in the log")
		}
	}
}
