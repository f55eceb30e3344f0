package config

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// secureClickHouseEnv is the environment that reaches s as its user over
// TLS with the test CA, on database db.
func secureClickHouseEnv(s *testenv.SecureClickHouse, db string) []string {
	return []string{
		EnvName("clickhouse.enabled") + "=true",
		EnvName("clickhouse.addr") + "=" + s.Addr,
		EnvName("clickhouse.database") + "=" + db,
		EnvName("clickhouse.user") + "=" + s.User,
		EnvName("clickhouse.password") + "=" + s.Password,
		EnvName("clickhouse.dial_timeout") + "=20s",
		EnvName("clickhouse.tls.enabled") + "=true",
		EnvName("clickhouse.tls.ca_file") + "=" + s.Certs.CAFile,
	}
}

// TestClickHouseTLS: from the clickhouse keys alone (TLS with a private
// CA, a user with a password), the sink creates its database and tables
// on a server that speaks only TLS, writes a hot-key event, and the query
// client and a pool as the operator API opens it read it back; with a
// client certificate too where the server asks for one.
func TestClickHouseTLS(t *testing.T) {
	for _, mtls := range []bool{false, true} {
		name := "tls"
		if mtls {
			name = "mtls"
		}
		t.Run(name, func(t *testing.T) {
			s := testenv.PrivateClickHouseTLS(t, testenv.SecureClickHouseOptions{RequireClientCert: mtls})
			env := secureClickHouseEnv(s, "keyheat_tls")
			if mtls {
				env = append(env, EnvName("clickhouse.tls.cert_file")+"="+s.Certs.CertFile,
					EnvName("clickhouse.tls.key_file")+"="+s.Certs.KeyFile)
			}
			cfg, err := Load(CmdDetect, Source{Environ: env})
			require.NoError(t, err)
			require.NotNil(t, cfg.ClickHouse.Options.TLS, "Load builds the TLS config")

			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
			defer cancel()
			w, err := clickhouse.Open(ctx, cfg.ClickHouse.Options, clickhouse.Deps{})
			require.NoError(t, err)
			acked := make(chan error, 1)
			onset := time.Now().Add(-time.Minute).Truncate(time.Second)
			h := &schemas.HotKeyEvent{Version: 1, ID: "tls-1", Type: schemas.HotKeyHot, App: "shop", Key: "tls:hot",
				OnsetMs: onset.UnixMilli(), DetectedMs: onset.UnixMilli()}
			require.NoError(t, w.WriteHotKey(ctx, h, func(err error) { acked <- err }))
			require.NoError(t, <-acked, "the row is in ClickHouse")
			require.NoError(t, w.Close(ctx))

			cl, err := clickhouse.Connect(ctx, cfg.ClickHouse.Options)
			require.NoError(t, err)
			defer cl.Close()
			rows, err := cl.Alerts(ctx, clickhouse.AlertsQuery{Range: clickhouse.Range{From: onset.Add(-time.Hour), To: time.Now().Add(time.Hour)}})
			require.NoError(t, err)
			require.Len(t, rows, 1)
			require.Equal(t, "tls:hot", rows[0].Key)

			pool, err := clickhouse.OpenPool(cfg.ClickHouse.Options)
			require.NoError(t, err)
			defer pool.Close()
			var n uint64
			require.NoError(t, pool.QueryRow(ctx, "SELECT count() FROM hotkey_events FINAL").Scan(&n))
			require.Equal(t, uint64(1), n, "the pool the operator API reads through")
		})
	}
}

// TestClickHouseTLSRefused: settings the server refuses fail the sink's
// first contact with a clickhouse.RefusedError naming the setting to fix,
// and the password is in no error.
func TestClickHouseTLSRefused(t *testing.T) {
	s := testenv.PrivateClickHouseTLS(t, testenv.SecureClickHouseOptions{})
	mutual := testenv.PrivateClickHouseTLS(t, testenv.SecureClickHouseOptions{RequireClientCert: true})
	other := testenv.NewTestCerts(t, "other.keyheat.test")
	const wrong = "wrong-password-7f3a9c"
	for _, tc := range []struct {
		name    string
		srv     *testenv.SecureClickHouse
		env     []string
		setting string
		want    string
	}{
		{"wrong CA", s, []string{EnvName("clickhouse.tls.ca_file") + "=" + other.CAFile}, "clickhouse.tls.ca_file",
			"is signed by a CA that clickhouse.tls.ca_file"},
		{"system CA pool", s, []string{EnvName("clickhouse.tls.ca_file") + "="}, "clickhouse.tls.ca_file", "the system's CA pool"},
		{"wrong server name", s, []string{EnvName("clickhouse.tls.server_name") + "=db.example.com"}, "clickhouse.tls.server_name",
			"is not for the name checked"},
		{"wrong password", s, []string{EnvName("clickhouse.password") + "=" + wrong}, "clickhouse.password",
			`refused user "keyheat": check clickhouse.user and clickhouse.password`},
		{"unknown user", s, []string{EnvName("clickhouse.user") + "=nobody"}, "clickhouse.password", `refused user "nobody"`},
		{"TLS to the plain port", s, []string{EnvName("clickhouse.addr") + "=" + s.PlainAddr}, "clickhouse.tls.enabled",
			"does not speak TLS there"},
		{"plain to the TLS port", s, []string{EnvName("clickhouse.tls.enabled") + "=false", EnvName("clickhouse.tls.ca_file") + "="},
			"clickhouse.tls.enabled", "set clickhouse.tls.enabled: true"},
		{"no client certificate", mutual, nil, "clickhouse.tls.cert_file", "clickhouse.tls.cert_file and key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(secureClickHouseEnv(tc.srv, "keyheat_refused"), tc.env...)
			cfg, err := Load(CmdDetect, Source{Environ: env})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
			defer cancel()
			_, err = clickhouse.Open(ctx, cfg.ClickHouse.Options, clickhouse.Deps{})
			require.Error(t, err)
			var re *clickhouse.RefusedError
			require.True(t, errors.As(err, &re), "a refusal, not a server away: %v", err)
			require.Equal(t, tc.setting, re.Setting, "%v", err)
			require.True(t, strings.HasPrefix(err.Error(), tc.setting+": "), "the error starts with the setting: %v", err)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), tc.srv.Password)
			require.NotContains(t, err.Error(), wrong)

			_, err = clickhouse.Connect(ctx, cfg.ClickHouse.Options)
			require.True(t, errors.As(err, &re), "the query client is refused alike: %v", err)
			require.Equal(t, tc.setting, re.Setting)
		})
	}
}

// TestClickHouseTLSFiles: the TLS files are read at Load, and a missing
// or wrong one is an error naming its key.
func TestClickHouseTLSFiles(t *testing.T) {
	certs := testenv.NewTestCerts(t, "x.keyheat.test")
	base := []string{EnvName("clickhouse.enabled") + "=true", EnvName("clickhouse.tls.enabled") + "=true"}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"missing CA", []string{EnvName("clickhouse.tls.ca_file") + "=/nonexistent/ca.pem"}, "clickhouse.tls.ca_file: open /nonexistent/ca.pem"},
		{"CA not PEM", []string{EnvName("clickhouse.tls.ca_file") + "=keyheat.example.yaml"}, "clickhouse.tls.ca_file: keyheat.example.yaml holds no PEM certificate"},
		{"key of another certificate", []string{EnvName("clickhouse.tls.cert_file") + "=" + certs.CertFile,
			EnvName("clickhouse.tls.key_file") + "=" + certs.ServerKeyFile}, "clickhouse.tls.cert_file: cert_file and key_file: tls: private key does not match public key"},
		{"cert without key", []string{EnvName("clickhouse.tls.cert_file") + "=" + certs.CertFile}, "clickhouse.tls.cert_file: cert_file and key_file go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(CmdDetect, Source{Environ: append(slicesClone(base), tc.env...)})
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := Load(CmdDetect, Source{Environ: []string{EnvName("clickhouse.tls.ca_file") + "=" + certs.CAFile}})
	require.EqualError(t, err, "clickhouse.tls.enabled: TLS files, server_name or insecure_skip_verify are set but TLS is off; set clickhouse.tls.enabled: true")
	cfg, err := Load(CmdIngest, Source{Environ: append(slicesClone(base), EnvName("clickhouse.tls.ca_file")+"=/nonexistent/ca.pem")})
	require.NoError(t, err, "ingest does not read the clickhouse section")
	require.Nil(t, cfg.ClickHouse.Options.TLS)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
