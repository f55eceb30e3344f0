package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// Tests of detect against a Kafka that speaks only TLS and SASL, fed by
// the ingest binary, as an operator would run the two.

// secureEnv is one test's secured cluster and the topics and groups it
// uses.
type secureEnv struct {
	k                   *testenv.SecureKafka
	mechanism           string
	mtls                bool
	events, dlq, hotkey string
	group, mergeGroup   string
	others              []string
}

func newSecureEnv(t *testing.T, k *testenv.SecureKafka, mechanism string, mtls bool) *secureEnv {
	return &secureEnv{k: k, mechanism: mechanism, mtls: mtls,
		events: testenv.UniqueName(t, "ev"), dlq: testenv.UniqueName(t, "dlq"), hotkey: testenv.UniqueName(t, "hot"),
		group: testenv.UniqueName(t, "g"), mergeGroup: testenv.UniqueName(t, "m"),
		others: []string{"--kafka.topics.windows=" + testenv.UniqueName(t, "win"), "--kafka.topics.reports=" + testenv.UniqueName(t, "rep"),
			"--kafka.topics.progress=" + testenv.UniqueName(t, "prog")}}
}

// kafkaFlags are the flags that reach the cluster, the password left out:
// each test says where it comes from.
func (e *secureEnv) kafkaFlags(t testing.TB) []string {
	f := []string{"--kafka.brokers=" + strings.Join(e.k.Seeds, ","), "--kafka.partitions=2",
		"--kafka.tls.enabled", "--kafka.tls.ca_file=" + e.k.CAFile,
		"--kafka.sasl.mechanism=" + strings.ToLower(e.mechanism), "--kafka.sasl.user=" + e.k.User(t, e.mechanism).User,
		"--kafka.topics.events=" + e.events, "--kafka.topics.dlq=" + e.dlq}
	if e.mtls {
		f = append(f, "--kafka.tls.cert_file="+e.k.CertFile, "--kafka.tls.key_file="+e.k.KeyFile)
	}
	return f
}

func (e *secureEnv) detectFlags(t testing.TB) []string {
	return append(append(e.kafkaFlags(t), e.others...), "--kafka.topics.hotkeys="+e.hotkey,
		"--detect.group="+e.group, "--detect.merge_group="+e.mergeGroup, "--detect.commit_interval=100ms",
		"--detect.session_timeout=6s", "--pipeline.lateness=0", `--pipeline.rules=[{name: t, key: "*", window: 1s, rate: 1000}]`)
}

// gen runs ingest gen with the planted key secure:hot at 30% of 10,000
// events/s for the whole run; env is added to its environment. It returns
// what ingest printed.
func (e *secureEnv) gen(t testing.TB, env []string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t, "github.com/keyheat/keyheat/cmd/ingest"), append(append([]string{"gen", "--rate=10000", "--duration=2s", "--keys=100", "--zipf=0",
		"--ingest.app=shop", "--hot=key=secure:hot,share=30%"}, e.kafkaFlags(t)...), extra...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "ingest gen:\n%s", out)
	require.Contains(t, string(out), "planted key=secure:hot count=")
	return string(out)
}

// TestSecureKafka: ingest gen then detect run --exit-at-end over TLS, for
// every SASL mechanism, with a client certificate where the cluster asks
// for one; the planted key is published hot, and a hotkeys.Follower built
// from the same settings (config.Kafka.ClientOpts) reads it from the
// registry.
func TestSecureKafka(t *testing.T) {
	plain := testenv.SecureKFake(t, testenv.SecureKafkaOptions{})
	mutual := testenv.SecureKFake(t, testenv.SecureKafkaOptions{RequireClientCert: true})
	for _, tc := range []struct {
		name      string
		k         *testenv.SecureKafka
		mechanism string
		mtls      bool
	}{
		{"PLAIN", plain, testenv.SASLPlain, false},
		{"SCRAM-SHA-256", plain, testenv.SASLScramSHA256, false},
		{"SCRAM-SHA-512", plain, testenv.SASLScramSHA512, false},
		{"SCRAM-SHA-512/mtls", mutual, testenv.SASLScramSHA512, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSecureEnv(t, tc.k, tc.mechanism, tc.mtls)
			pwEnv := []string{config.EnvName("kafka.sasl.password") + "=" + tc.k.User(t, tc.mechanism).Password}
			e.gen(t, pwEnv)
			p := start(t, pwEnv, append([]string{"run", "--exit-at-end", "--print=json", "--from=earliest"}, e.detectFlags(t)...)...)
			require.Equal(t, 0, p.WaitExit(), "an exit-at-end run over TLS and SASL ends by itself")
			var hot []string
			for _, line := range strings.Split(p.Stdout.String(), "\n") {
				if strings.Contains(line, `"type":"hot"`) {
					h, err := schemas.DecodeHotKeyEvent([]byte(line))
					require.NoError(t, err)
					hot = append(hot, h.App+"/"+h.Key)
				}
			}
			require.Contains(t, hot, "shop/secure:hot", "the planted key is found")

			// The application's side: the same settings, through config.
			k := config.Defaults().Kafka
			u := tc.k.User(t, tc.mechanism)
			k.Brokers = tc.k.Seeds
			k.SASL = config.SASL{Mechanism: strings.ToLower(tc.mechanism), User: u.User, Password: u.Password}
			k.TLS = config.TLS{Enabled: true, CAFile: tc.k.CAFile}
			if tc.mtls {
				k.TLS.CertFile, k.TLS.KeyFile = tc.k.CertFile, tc.k.KeyFile
			}
			opts, err := k.ClientOpts()
			require.NoError(t, err)
			f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: opts, Topic: e.hotkey})
			require.NoError(t, err)
			defer f.Close()
			rctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
			defer cancel()
			require.NoError(t, f.WaitReady(rctx), "the follower reads the registry to its end over TLS and SASL")
			ent, ok := f.Get("shop", "secure:hot")
			require.True(t, ok, "the follower has the planted key; it has %d entries", f.Stats().Entries)
			require.Equal(t, hotkeys.SourceDetector, ent.Source)
		})
	}
}

// TestSecureKafkaRefused: settings the brokers refuse end detect at
// start, exit 1, with an error naming the setting to fix, not a wait; the
// refused password is in none of its output.
func TestSecureKafkaRefused(t *testing.T) {
	k := testenv.SecureKFake(t, testenv.SecureKafkaOptions{RequireClientCert: true})
	const wrong = "wrong-password-5c1e"
	for _, tc := range []struct {
		name, mechanism string
		extra           []string
		want            string
	}{
		{"wrong password/PLAIN", testenv.SASLPlain, []string{"--kafka.sasl.password=" + wrong}, "kafka.sasl.password: the brokers closed the connection while authenticating"},
		{"wrong password/SCRAM-SHA-256", testenv.SASLScramSHA256, []string{"--kafka.sasl.password=" + wrong}, "kafka.sasl.password:"},
		{"wrong password/SCRAM-SHA-512", testenv.SASLScramSHA512, []string{"--kafka.sasl.password=" + wrong}, "kafka.sasl.password:"},
		{"no CA", testenv.SASLScramSHA512, []string{"--kafka.tls.ca_file="}, "kafka.tls.ca_file: the brokers' certificate is signed by a CA that the system's CA pool does not hold"},
		{"no client certificate", testenv.SASLScramSHA512, []string{"--kafka.tls.cert_file=", "--kafka.tls.key_file="}, "kafka.tls.cert_file:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSecureEnv(t, k, tc.mechanism, true)
			env := []string{}
			if !strings.HasPrefix(tc.name, "wrong password") {
				env = append(env, config.EnvName("kafka.sasl.password")+"="+k.User(t, tc.mechanism).Password)
			}
			began := time.Now()
			p := start(t, env, append(append([]string{"run", "--exit-at-end"}, e.detectFlags(t)...), tc.extra...)...)
			require.Equal(t, 1, p.WaitExit())
			t.Logf("detect refused after %s", time.Since(began).Round(time.Millisecond))
			require.NotEmpty(t, p.Stderr.Match(regexpOf(regexpQuote("detect: "+tc.want))), "stderr:\n%s", p.Stderr)
			out := p.Stdout.String() + p.Stderr.String()
			require.NotContains(t, out, wrong)
			require.NotContains(t, out, k.User(t, tc.mechanism).Password)
		})
	}
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestSecretsNotPrinted: with every secret set, from the environment or
// from files, and the log at debug, neither ingest nor detect prints one:
// a full run over TLS and SASL, and a start that ClickHouse refuses.
func TestSecretsNotPrinted(t *testing.T) {
	k := testenv.SecureKFake(t, testenv.SecureKafkaOptions{})
	pw := k.User(t, testenv.SASLScramSHA512).Password
	const token = "api-token-9d2b6e0c41"
	for _, from := range []string{"env", "file"} {
		t.Run(from, func(t *testing.T) {
			e := newSecureEnv(t, k, testenv.SASLScramSHA512, false)
			var env []string
			if from == "env" {
				env = []string{config.EnvName("kafka.sasl.password") + "=" + pw, config.EnvName("api.token") + "=" + token}
			} else {
				dir := t.TempDir()
				for name, v := range map[string]string{"kafka": pw, "api": token} {
					require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o600))
				}
				env = []string{config.EnvName("kafka.sasl.password_file") + "=" + filepath.Join(dir, "kafka"),
					config.EnvName("api.token_file") + "=" + filepath.Join(dir, "api")}
			}
			env = append(env, config.EnvName("log.level")+"=debug")
			out := e.gen(t, env)
			require.Contains(t, out, "level=DEBUG", "the log is at debug")
			require.NotContains(t, out, pw, "ingest printed the Kafka password")

			p := start(t, env, append([]string{"run", "--exit-at-end", "--print=text", "--from=earliest", "--api.addr=127.0.0.1:0"},
				e.detectFlags(t)...)...)
			require.Equal(t, 0, p.WaitExit())
			all := p.Stdout.String() + "\n" + p.Stderr.String()
			require.Contains(t, all, "level=DEBUG")
			require.Contains(t, all, "secure:hot", "the run did its work")
			require.NotContains(t, all, pw, "detect printed the Kafka password")
			require.NotContains(t, all, token, "detect printed the API token")
		})
	}
}

// TestClickHousePasswordNotPrinted: a ClickHouse that refuses the
// password ends detect at start; the password, from the environment or
// a file, is in none of its output, at debug.
func TestClickHousePasswordNotPrinted(t *testing.T) {
	addr := testenv.ClickHouseAddr(t)
	const secret = "clickhouse-secret-3e8f1a"
	file := filepath.Join(t.TempDir(), "ch")
	require.NoError(t, os.WriteFile(file, []byte(secret+"\n"), 0o600))
	broker, _ := testenv.CountingListener(t)
	for _, env := range [][]string{
		{config.EnvName("clickhouse.password") + "=" + secret},
		{config.EnvName("clickhouse.password_file") + "=" + file},
	} {
		t.Run(strings.SplitN(env[0], "=", 2)[0], func(t *testing.T) {
			p := start(t, append(env, config.EnvName("log.level")+"=debug"), "run", "--kafka.brokers="+broker,
				"--clickhouse.enabled", "--clickhouse.addr="+addr, "--clickhouse.user=default",
				"--clickhouse.database="+testenv.UniqueName(t, "db"), "--clickhouse.dial_timeout=10s")
			require.Equal(t, 1, p.WaitExit(), "ClickHouse refuses a password its default user does not have")
			all := p.Stdout.String() + "\n" + p.Stderr.String()
			require.Regexp(t, `detect: clickhouse: .*(?i)password`, all, "detect said ClickHouse refused the password")
			require.NotContains(t, all, secret)
		})
	}
}
