package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/internal/topics"
)

// secureKafka returns the kafka section that reaches s as its user for
// mechanism (Kafka's name), over TLS with the test CA and, when mtls, the
// client certificate.
func secureKafka(t *testing.T, s *testenv.SecureKafka, mechanism string, mtls bool) Kafka {
	t.Helper()
	u := s.User(t, mechanism)
	k := Defaults().Kafka
	k.Brokers = s.Seeds
	k.SASL = SASL{Mechanism: strings.ToLower(mechanism), User: u.User, Password: u.Password}
	k.TLS = TLS{Enabled: true, CAFile: s.CAFile}
	if mtls {
		k.TLS.CertFile, k.TLS.KeyFile = s.CertFile, s.KeyFile
	}
	return k
}

// TestClientOptsSecure: the options ClientOpts builds reach a cluster
// that speaks only TLS and SASL, for every mechanism, with and without a
// client certificate: a record produced through them is read back through
// them, and CheckAccess finds nothing to refuse.
func TestClientOptsSecure(t *testing.T) {
	for _, mtls := range []bool{false, true} {
		s := testenv.SecureKFake(t, testenv.SecureKafkaOptions{RequireClientCert: mtls})
		for _, m := range testenv.SASLMechanisms() {
			name := m
			if mtls {
				name += "/mtls"
			}
			t.Run(name, func(t *testing.T) {
				k := secureKafka(t, s, m, mtls)
				ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
				defer cancel()
				require.NoError(t, k.CheckAccess(ctx))

				opts, err := k.ClientOpts()
				require.NoError(t, err)
				topic := testenv.UniqueName(t, "t")
				cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
				require.NoError(t, err)
				defer cl.Close()
				require.NoError(t, topics.Ensure(ctx, cl, true, topics.Spec{Name: topic, Partitions: 1, ReplicationFactor: -1}))
				require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(name)}).FirstErr())
				var got []string
				for len(got) == 0 {
					fs := cl.PollFetches(ctx)
					require.NoError(t, ctx.Err(), "nothing read back over TLS and SASL")
					require.NoError(t, fs.Err0())
					fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
				}
				require.Equal(t, []string{name}, got)
			})
		}
	}
}

// TestCheckAccessNamesTheSetting: each way of presenting the wrong thing
// to a secured cluster is refused at once by CheckAccess with the key to
// fix, and the error never holds a password.
func TestCheckAccessNamesTheSetting(t *testing.T) {
	s := testenv.SecureKFake(t, testenv.SecureKafkaOptions{RequireClientCert: true})
	const wrong = "wrong-password-7f3a"
	type tc struct {
		name string
		mech string
		mod  func(k *Kafka)
		key  string
	}
	var cases []tc
	for _, m := range testenv.SASLMechanisms() {
		cases = append(cases,
			tc{"wrong password/" + m, m, func(k *Kafka) { k.SASL.Password = wrong }, "kafka.sasl.password"},
			tc{"unknown user/" + m, m, func(k *Kafka) { k.SASL.User = "nobody" }, "kafka.sasl.password"})
	}
	cases = append(cases,
		tc{"no CA", testenv.SASLScramSHA512, func(k *Kafka) { k.TLS.CAFile = "" }, "kafka.tls.ca_file"},
		tc{"wrong server name", testenv.SASLScramSHA512, func(k *Kafka) { k.TLS.ServerName = "other.example" }, "kafka.tls.server_name"},
		tc{"no client certificate", testenv.SASLScramSHA512, func(k *Kafka) { k.TLS.CertFile, k.TLS.KeyFile = "", "" }, "kafka.tls.cert_file"},
		tc{"TLS off", testenv.SASLScramSHA512, func(k *Kafka) { k.TLS = TLS{} }, "kafka.tls.enabled"},
		tc{"SASL off", testenv.SASLScramSHA512, func(k *Kafka) { k.SASL = SASL{} }, "kafka.sasl.mechanism"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := secureKafka(t, s, c.mech, true)
			right := k.SASL.Password
			c.mod(&k)
			// A hang guard only: every refusal comes back in well under
			// a second on an idle machine.
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
			defer cancel()
			err := k.CheckAccess(ctx)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "want a *FieldError, got %T: %v", err, err)
			require.Equal(t, c.key, fe.Key, "%v", err)
			require.NoError(t, ctx.Err(), "the refusal was waited on, not found")
			require.NotContains(t, err.Error(), wrong)
			require.NotContains(t, err.Error(), right)
		})
	}
}

// TestCheckAccessAwayBroker: a broker that is not there is not a refusal;
// CheckAccess returns the dial error for the caller to wait on.
func TestCheckAccessAwayBroker(t *testing.T) {
	k := Defaults().Kafka
	k.Brokers = []string{"127.0.0.1:1"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := k.CheckAccess(ctx)
	require.Error(t, err)
	var fe *FieldError
	require.False(t, errors.As(err, &fe), "an absent broker named a setting: %v", err)
}

// TestSecretsFromEnvAndFile: the passwords come from the environment or
// from a file (trailing line breaks dropped); both at once, an empty file
// or a missing one is an error naming the key, never the secret.
func TestSecretsFromEnvAndFile(t *testing.T) {
	const secret = "s3cret with spaces" // spaces are a password's own
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	require.NoError(t, os.WriteFile(file, []byte(secret+"\r\n\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))

	for _, s := range []struct{ key, file string }{
		{"kafka.sasl.password", "kafka.sasl.password_file"},
		{"clickhouse.password", "clickhouse.password_file"},
	} {
		get := func(c *Config) string { return valueOf(c, s.key).(string) }
		t.Run(s.key, func(t *testing.T) {
			cfg, err := Load(CmdDetect, Source{Environ: []string{EnvName(s.key) + "=" + secret}})
			require.NoError(t, err)
			require.Equal(t, secret, get(cfg))

			cfg, err = Load(CmdDetect, Source{Environ: []string{EnvName(s.file) + "=" + file}})
			require.NoError(t, err)
			require.Equal(t, secret, get(cfg))

			for _, bad := range []struct {
				env  []string
				want string
			}{
				{[]string{EnvName(s.key) + "=" + secret, EnvName(s.file) + "=" + file}, s.file + ": " + s.key + " is set too; set one of them"},
				{[]string{EnvName(s.file) + "=" + empty}, s.file + ": " + empty + " is empty"},
				{[]string{EnvName(s.file) + "=" + filepath.Join(dir, "nope")}, s.file + ": read the secret: open "},
			} {
				_, err := Load(CmdDetect, Source{Environ: bad.env})
				require.ErrorContains(t, err, bad.want)
				require.NotContains(t, err.Error(), secret)
				require.NotContains(t, err.Error(), "s3cret")
			}
		})
	}
	// ingest does not read clickhouse: its file is not read either.
	_, err := Load(CmdIngest, Source{Environ: []string{EnvName("clickhouse.password_file") + "=" + filepath.Join(dir, "nope")}})
	require.NoError(t, err)
}

// TestCheckAccessPlainListener: brokers on a listener without TLS or SASL
// (the real Kafka of the tests) refuse TLS and SASL; CheckAccess names
// the setting that differs, kafka.tls.enabled or kafka.sasl.mechanism,
// instead of returning a dial error to be waited on like an absent
// broker, or blaming a password the brokers never asked for.
func TestCheckAccessPlainListener(t *testing.T) {
	seeds := testenv.KafkaSeeds(t)
	const pw = "never-asked-4d1c"
	for _, tc := range []struct {
		name string
		mod  func(k *Kafka)
		key  string
	}{
		{"TLS on", func(k *Kafka) { k.TLS.Enabled = true }, "kafka.tls.enabled"},
		{"SASL on", func(k *Kafka) { k.SASL = SASL{Mechanism: "scram-sha-512", User: "keyheat", Password: pw} }, "kafka.sasl.mechanism"},
		{"SASL PLAIN on", func(k *Kafka) { k.SASL = SASL{Mechanism: "plain", User: "keyheat", Password: pw} }, "kafka.sasl.mechanism"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := Defaults().Kafka
			k.Brokers = seeds
			tc.mod(&k)
			ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
			defer cancel()
			err := k.CheckAccess(ctx)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "want a *FieldError, got %T: %v", err, err)
			require.Equal(t, tc.key, fe.Key, "%v", err)
			require.NotContains(t, err.Error(), pw)
		})
	}
}

// TestCheckAccessSlowSASLIsNoRefusal: brokers that take longer to answer
// the SASL authentication than the caller waits did not refuse the
// password; CheckAccess returns the context's error for the caller to
// wait on, not a *FieldError that would end the command as if the
// password were wrong.
func TestCheckAccessSlowSASLIsNoRefusal(t *testing.T) {
	const user, pw = "keyheat", "right-password-81a0"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", user, pw))
	require.NoError(t, err)
	release := make(chan struct{})
	t.Cleanup(func() { close(release); c.Close() })
	c.ControlKey(kmsg.SASLAuthenticate.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	k := Defaults().Kafka
	k.Brokers = c.ListenAddrs()
	k.SASL = SASL{Mechanism: "plain", User: user, Password: pw}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard: the connection's own read timeout ends the wait
	defer cancel()
	err = k.CheckAccess(ctx)
	require.Error(t, err)
	var fe *FieldError
	require.False(t, errors.As(err, &fe), "brokers slow to answer named a setting: %v", err)
}
