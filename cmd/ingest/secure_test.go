package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/testenv"
)

// secureFlags are the flags that reach k as its user for mechanism over
// TLS (with the client certificate), the password left out, and topics
// of the test's own.
func secureFlags(t *testing.T, k *testenv.SecureKafka, mechanism string) []string {
	return []string{"--kafka.brokers=" + strings.Join(k.Seeds, ","), "--kafka.partitions=2",
		"--kafka.tls.enabled", "--kafka.tls.ca_file=" + k.CAFile, "--kafka.tls.cert_file=" + k.CertFile, "--kafka.tls.key_file=" + k.KeyFile,
		"--kafka.sasl.mechanism=" + strings.ToLower(mechanism), "--kafka.sasl.user=" + k.User(t, mechanism).User,
		"--kafka.topics.events=" + testenv.UniqueName(t, "ev"), "--kafka.topics.dlq=" + testenv.UniqueName(t, "dlq")}
}

// TestSecureKafkaRefused: with kafka.connect_timeout at its default (wait
// for the brokers as long as it takes), settings the brokers refuse end
// ingest at start, exit 1, with an error naming the setting, instead of a
// wait; the refused password is in none of its output.
func TestSecureKafkaRefused(t *testing.T) {
	k := testenv.SecureKFake(t, testenv.SecureKafkaOptions{RequireClientCert: true})
	const wrong = "wrong-password-0b7d"
	for _, tc := range []struct {
		name, mechanism string
		extra           []string
		want            string
	}{
		{"wrong password/PLAIN", testenv.SASLPlain, []string{"--kafka.sasl.password=" + wrong}, "ingest: kafka.sasl.password: the brokers closed the connection while authenticating"},
		{"wrong password/SCRAM-SHA-256", testenv.SASLScramSHA256, []string{"--kafka.sasl.password=" + wrong}, "ingest: kafka.sasl.password:"},
		{"wrong password/SCRAM-SHA-512", testenv.SASLScramSHA512, []string{"--kafka.sasl.password=" + wrong}, "ingest: kafka.sasl.password:"},
		{"no CA", testenv.SASLScramSHA512, []string{"--kafka.tls.ca_file="}, "ingest: kafka.tls.ca_file: the brokers' certificate is signed by a CA that the system's CA pool does not hold"},
		{"no client certificate", testenv.SASLScramSHA512, []string{"--kafka.tls.cert_file=", "--kafka.tls.key_file="}, "ingest: kafka.tls.cert_file:"},
		{"TLS off", testenv.SASLScramSHA512, []string{"--kafka.tls.enabled=false", "--kafka.tls.ca_file=", "--kafka.tls.cert_file=", "--kafka.tls.key_file="}, "ingest: kafka.tls.enabled:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"gen", "--count=100"}, secureFlags(t, k, tc.mechanism)...), tc.extra...)
			if !strings.HasPrefix(tc.name, "wrong password") {
				args = append(args, "--kafka.sasl.password="+k.User(t, tc.mechanism).Password)
			}
			began := time.Now()
			p := startIngest(t, nil, args...)
			require.Equal(t, 1, p.WaitExit())
			t.Logf("ingest refused after %s", time.Since(began).Round(time.Millisecond))
			out := p.Stderr.String()
			require.Contains(t, out, tc.want)
			require.NotContains(t, out, wrong)
		})
	}
}

// TestSecretsNotPrinted: the Kafka password, from the environment or a
// file, is in none of ingest's output at log.level=debug, over TLS and
// every SASL mechanism.
func TestSecretsNotPrinted(t *testing.T) {
	k := testenv.SecureKFake(t, testenv.SecureKafkaOptions{RequireClientCert: true})
	for _, m := range testenv.SASLMechanisms() {
		pw := k.User(t, m).Password
		file := filepath.Join(t.TempDir(), "pw")
		require.NoError(t, os.WriteFile(file, []byte(pw+"\n"), 0o600))
		for _, env := range []string{config.EnvName("kafka.sasl.password") + "=" + pw, config.EnvName("kafka.sasl.password_file") + "=" + file} {
			t.Run(m+"/"+strings.SplitN(env, "=", 2)[0], func(t *testing.T) {
				name, value, _ := strings.Cut(env, "=")
				t.Setenv(name, value) // the process inherits it
				p := startIngest(t, nil, append([]string{"gen", "--count=2000", "--hot=key=secure:hot,share=10%", "--log.level=debug"},
					secureFlags(t, k, m)...)...)
				require.Equal(t, 0, p.WaitExit())
				out := p.Stderr.String()
				require.Contains(t, out, "level=DEBUG")
				require.Contains(t, out, "total events=2000")
				require.NotContains(t, out, pw)
			})
		}
	}
}

// TestTLSOnPlainListener: kafka.tls.enabled set for brokers that do not
// speak TLS (the real Kafka's plain listener) ends ingest at start, exit
// 1, naming kafka.tls.enabled, with kafka.connect_timeout at its default;
// it is not waited on as if the brokers were away.
func TestTLSOnPlainListener(t *testing.T) {
	seeds := testenv.KafkaSeeds(t)
	p := startIngest(t, nil, "gen", "--count=100", "--kafka.brokers="+strings.Join(seeds, ","), "--kafka.tls.enabled",
		"--kafka.topics.events="+testenv.UniqueName(t, "ev"), "--kafka.topics.dlq="+testenv.UniqueName(t, "dlq"))
	require.Equal(t, 1, p.WaitExit())
	require.Contains(t, p.Stderr.String(), "ingest: kafka.tls.enabled:")
}
