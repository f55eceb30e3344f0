package main

import (
	"bytes"
	"flag"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParseConfig: flags win over SHOP_ variables, which win over the
// defaults; a bad value says where it came from.
func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, c config)
		wantErr string
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			require.Equal(t, config{addr: "127.0.0.1:8080", app: "shop", kafka: "127.0.0.1:9092", redis: "127.0.0.1:6379",
				registry: "keyheat.hotkeys", events: "keyheat.events", invalidation: "keyheat.invalidations",
				localCache: true, localTTL: 30 * time.Second, logLevel: slog.LevelInfo}, c)
		}},
		{name: "env", env: map[string]string{"SHOP_REDIS_CLUSTER": "true", "SHOP_LOCAL_TTL": "2s", "SHOP_EVENTS_TOPIC": "ev", "SHOP_LOG_LEVEL": "debug"},
			check: func(t *testing.T, c config) {
				require.True(t, c.redisCluster)
				require.Equal(t, 2*time.Second, c.localTTL)
				require.Equal(t, "ev", c.events)
				require.Equal(t, slog.LevelDebug, c.logLevel)
			}},
		{name: "flag over env", args: []string{"--seed=5", "--local-cache=false"}, env: map[string]string{"SHOP_SEED": "7", "SHOP_LOCAL_CACHE": "true"},
			check: func(t *testing.T, c config) {
				require.Equal(t, 5, c.seed)
				require.False(t, c.localCache)
			}},
		{name: "bad env", env: map[string]string{"SHOP_SEED": "many"}, wantErr: `SHOP_SEED="many"`},
		{name: "bad flag", args: []string{"--local-ttl=soon"}, wantErr: "local-ttl"},
		{name: "zero ttl", args: []string{"--local-ttl=0s"}, wantErr: "--local-ttl must be positive"},
		{name: "negative seed", env: map[string]string{"SHOP_SEED": "-1"}, wantErr: "--seed must not be negative"},
		{name: "arguments", args: []string{"serve"}, wantErr: "flags only"},
		{name: "help", args: []string{"--help"}, wantErr: flag.ErrHelp.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, &bytes.Buffer{})
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}
