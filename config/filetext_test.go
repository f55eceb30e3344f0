package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFileStringKeysKeepTheirText: a key that holds text (a password, a
// token, an app or client name) takes a plain YAML scalar as it is
// written, even one YAML would read as a number: 012345 is not 5349, nor
// 0x1F 31 or 1.50 1.5. A password changed on its way in fails at the
// broker as if it were wrong.
func TestFileStringKeysKeepTheirText(t *testing.T) {
	for _, v := range []string{"012345", "1e3", "0x1F", "1.50", "1_000", "0o17", "+12", "12345"} {
		t.Run(v, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keyheat.yaml")
			require.NoError(t, os.WriteFile(path, []byte("kafka:\n  client_id: "+v+"\n  sasl:\n    password: "+v+
				"\nclickhouse:\n  password: "+v+"\napi:\n  token: "+v+"\ningest:\n  app: "+v+"\n"), 0o600))
			cfg, err := Load(CmdDetect, Source{File: path, Environ: []string{}})
			require.NoError(t, err)
			require.Equal(t, v, cfg.Kafka.SASL.Password, "kafka.sasl.password")
			require.Equal(t, v, cfg.ClickHouse.Password, "clickhouse.password")
			require.Equal(t, v, cfg.API.Token, "api.token")
			require.Equal(t, v, cfg.Kafka.ClientID, "kafka.client_id")
			require.Equal(t, v, cfg.Ingest.Parse.App, "ingest.app")
		})
	}
}
