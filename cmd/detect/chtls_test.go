package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/testenv"
)

// chTLSFlags reach the private TLS server s as its user, on database db,
// with the test CA; the password is left out: each test says where it
// comes from.
func chTLSFlags(s *testenv.SecureClickHouse, db string, extra ...string) []string {
	return append([]string{"--clickhouse.addr=" + s.Addr, "--clickhouse.database=" + db, "--clickhouse.user=" + s.User,
		"--clickhouse.tls.enabled", "--clickhouse.tls.ca_file=" + s.Certs.CAFile, "--clickhouse.dial_timeout=20s",
		"--clickhouse.flush_interval=100ms"}, extra...)
}

// TestClickHouseTLSRun: detect, at debug, writes a planted hot key to a
// ClickHouse that speaks only TLS and has a user with a password (from a
// file), and `detect query alerts` reads it back over TLS; the password
// is in none of their output.
func TestClickHouseTLSRun(t *testing.T) {
	s := testenv.PrivateClickHouseTLS(t, testenv.SecureClickHouseOptions{})
	seeds := testenv.KFake(t)
	events := testenv.NewTopic(t, seeds, 2)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	producePlanted(t, seeds, events, base.UnixMilli())
	pwFile := filepath.Join(t.TempDir(), "ch")
	require.NoError(t, os.WriteFile(pwFile, []byte(s.Password+"\n"), 0o600))
	env := []string{config.EnvName("log.level") + "=debug", config.EnvName("clickhouse.password_file") + "=" + pwFile}
	const db = "keyheat_tls_run"

	e := newRunEnv(t, seeds, events)
	p := start(t, env, append(append([]string{"run", "--exit-at-end", sinkRules, "--clickhouse.enabled"}, e.flags()...),
		chTLSFlags(s, db)...)...)
	require.Equal(t, 0, p.WaitExit(), "a run over TLS ClickHouse ends by itself")
	all := p.Stdout.String() + "\n" + p.Stderr.String()
	require.Contains(t, all, "level=DEBUG")
	require.Contains(t, all, `msg="applied clickhouse migration"`, "the migrations ran over TLS")
	require.NotContains(t, all, s.Password, "detect printed the ClickHouse password")

	var n uint64
	c, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	require.NoError(t, s.Conn(t).QueryRow(c, "SELECT count() FROM "+db+".hotkey_events FINAL WHERE key = @k AND type = 'hot'",
		clickhouse.Named("k", plantedKey)).Scan(&n))
	require.Equal(t, uint64(1), n, "the planted key's hot is in ClickHouse")

	q := start(t, env, append([]string{"query", "alerts", "--from=" + base.Add(-time.Hour).Format(time.RFC3339), "--json"},
		chTLSFlags(s, db)...)...)
	require.Equal(t, 0, q.WaitExit())
	require.Contains(t, q.Stdout.String(), `"key":"`+plantedKey+`"`, "detect query reads over TLS")
	require.NotContains(t, q.Stdout.String()+q.Stderr.String(), s.Password)
}

// TestClickHouseTLSRefused: settings the TLS server refuses end detect
// run, and detect query, at start, exit 1, with an error naming the
// setting to fix; the password, right or wrong, is in none of their
// output, the log set to debug.
func TestClickHouseTLSRefused(t *testing.T) {
	s := testenv.PrivateClickHouseTLS(t, testenv.SecureClickHouseOptions{})
	other := testenv.NewTestCerts(t, "other.keyheat.test")
	broker, _ := testenv.CountingListener(t)
	const wrong = "wrong-password-2b8e41"
	for _, tc := range []struct {
		name  string
		extra []string
		pw    string
		want  string
	}{
		{"wrong CA", []string{"--clickhouse.tls.ca_file=" + other.CAFile}, s.Password,
			"clickhouse.tls.ca_file: the certificate of clickhouse " + s.Addr + " is signed by a CA that clickhouse.tls.ca_file"},
		{"wrong server name", []string{"--clickhouse.tls.server_name=db.example.com"}, s.Password,
			"clickhouse.tls.server_name: the certificate of clickhouse " + s.Addr + " is not for the name checked"},
		{"wrong password", nil, wrong,
			`clickhouse.password: clickhouse ` + s.Addr + ` refused user "keyheat": check clickhouse.user and clickhouse.password`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{config.EnvName("log.level") + "=debug", config.EnvName("clickhouse.password") + "=" + tc.pw}
			flags := chTLSFlags(s, "keyheat_refused", tc.extra...)
			p := start(t, env, append([]string{"run", "--kafka.brokers=" + broker, "--clickhouse.enabled"}, flags...)...)
			require.Equal(t, 1, p.WaitExit())
			require.NotEmpty(t, p.Stderr.Match(regexpOf(regexpQuote("detect: clickhouse: "+tc.want))), "stderr:\n%s", p.Stderr)
			q := start(t, env, append([]string{"query", "alerts", "--since=1h"}, flags...)...)
			require.Equal(t, 1, q.WaitExit())
			require.NotEmpty(t, q.Stderr.Match(regexpOf(regexpQuote("query: "+tc.want))), "stderr:\n%s", q.Stderr)
			for _, out := range []string{p.Stdout.String(), p.Stderr.String(), q.Stdout.String(), q.Stderr.String()} {
				require.NotContains(t, out, s.Password)
				require.NotContains(t, out, wrong)
			}
		})
	}
}
