package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keyheat.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := Load(Source{Environ: []string{}})
	require.NoError(t, err)
	require.Equal(t, Defaults(), *cfg)
}

func TestExampleFileDocumentsEveryKey(t *testing.T) {
	const example = "keyheat.example.yaml"
	cfg, err := Load(Source{File: example, Environ: []string{}})
	require.NoError(t, err, "the example file must load")
	require.Equal(t, Defaults(), *cfg, "the example shows every default; keep them in step")

	raw, err := os.ReadFile(example)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	var inFile []string
	var flatten func(prefix string, m map[string]any)
	flatten = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok {
				flatten(key, sub)
				continue
			}
			inFile = append(inFile, key)
		}
	}
	flatten("", doc)
	require.ElementsMatch(t, Keys(), inFile)
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, "kafka:\n  brokers: [file:1]\n  client_id: from-file\nlog:\n  level: warn\n")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--kafka.brokers=flag:1,flag:2"}))

	cfg, err := Load(Source{
		File:    file,
		Flags:   fs,
		Environ: []string{"KEYHEAT_KAFKA_BROKERS=env:1", "KEYHEAT_KAFKA_CLIENT_ID=from-env", "KEYHEAT_EVENTS_MAX_SKEW=90s"},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"flag:1", "flag:2"}, cfg.Kafka.Brokers, "a set flag beats env and file")
	require.Equal(t, "from-env", cfg.Kafka.ClientID, "env beats file")
	require.Equal(t, "warn", cfg.Log.Level, "file beats default")
	require.Equal(t, "info", Defaults().Log.Level)
	require.Equal(t, 90*time.Second, cfg.Events.MaxSkew, "durations parse from env")
	require.Equal(t, "text", cfg.Log.Format, "an unset flag does not override the default")
}

// Every key must be settable from the environment: viper ignores env vars
// for keys it does not know, which is the gap Load closes.
func TestEveryKeyFromEnv(t *testing.T) {
	for _, key := range Keys() {
		t.Run(key, func(t *testing.T) {
			env := []string{EnvName(key) + "=" + sampleValue(key)}
			for _, extra := range companions[key] {
				k, v, _ := strings.Cut(extra, "=")
				env = append(env, EnvName(k)+"="+v)
			}
			cfg, err := Load(Source{Environ: env})
			require.NoError(t, err)
			require.NotEqual(t, fmt.Sprint(lookupDefault(ptr(Defaults()), key)), fmt.Sprint(lookupDefault(cfg, key)),
				"%s from env changed nothing", EnvName(key))
		})
	}
}

func ptr[T any](v T) *T { return &v }

// companions are the other keys a sample value needs to form a valid
// config (a SASL mechanism needs a user).
var companions = map[string][]string{
	"kafka.sasl.mechanism":           {"kafka.sasl.user=u"},
	"kafka.tls.ca_file":              {"kafka.tls.enabled=true"},
	"kafka.tls.cert_file":            {"kafka.tls.enabled=true", "kafka.tls.key_file=k.pem"},
	"kafka.tls.key_file":             {"kafka.tls.enabled=true", "kafka.tls.cert_file=c.pem"},
	"kafka.tls.server_name":          {"kafka.tls.enabled=true"},
	"ingest.regex.pattern":           {"ingest.format=regex"},
	"ingest.combined.key":            {"ingest.combined.query_param=k"},
	"kafka.tls.insecure_skip_verify": {"kafka.tls.enabled=true"},
}

// sampleValue returns a valid value for key that differs from its default,
// chosen by the key's type, or by the key where only some values are valid.
func sampleValue(key string) string {
	special := map[string]string{
		"log.level":                "debug",
		"log.format":               "json",
		"metrics.addr":             "127.0.0.1:9999",
		"kafka.brokers":            "h1:1,h2:2",
		"clickhouse.addr":          "h1:1,h2:2",
		"kafka.sasl.mechanism":     "plain",
		"events.codec":             "binary",
		"kafka.replication_factor": "3",
		"ingest.format":            "json",
		"ingest.compression":       "lz4",
		"ingest.combined.key":      "query",
		"ingest.json.time_format":  "unix_ms",
		"ingest.regex.time_format": "rfc3339",
		"ingest.regex.pattern":     `(?P<key>\S+)`,
		"ingest.topic.topics":      "raw.a,raw.b",
	}
	if v, ok := special[key]; ok {
		return v
	}
	if strings.HasPrefix(key, "kafka.topics.") {
		return "changed." + key[len("kafka.topics."):]
	}
	switch def := lookupDefault(ptr(Defaults()), key).(type) {
	case time.Duration:
		return (def + 42*time.Second).String()
	case int:
		return fmt.Sprint(def + 3)
	case bool:
		return fmt.Sprint(!def)
	case []string:
		return "changed"
	default:
		return "changed"
	}
}

func TestUnknownKeysAreErrors(t *testing.T) {
	file := writeFile(t, "kafka:\n  brokerz: [a:1]\n")
	_, err := Load(Source{File: file, Environ: []string{}})
	require.ErrorContains(t, err, "brokerz")

	_, err = Load(Source{Environ: []string{"KEYHEAT_KAFKA_BROKERZ=a:1"}})
	require.ErrorContains(t, err, "KEYHEAT_KAFKA_BROKERZ")

	_, err = Load(Source{Environ: []string{"KEYHEAT_TEST_KAFKA=a:1", "KEYHEAT_SERVICES_PORT_OFFSET=100", "KEYHEAT_CONFIG=x.yaml"}})
	require.NoError(t, err, "the scripts' and tests' variables are not config keys")

	_, err = Load(Source{File: filepath.Join(t.TempDir(), "missing.yaml"), Environ: []string{}})
	require.ErrorContains(t, err, "missing.yaml")
}

func TestValidateNamesEveryProblem(t *testing.T) {
	tests := []validateCase{
		{"no brokers", func(c *Config) { c.Kafka.Brokers = nil }, []string{"kafka.brokers: must not be empty"}},
		{"broker without port", func(c *Config) { c.Kafka.Brokers = []string{"localhost"} }, []string{"kafka.brokers: \"localhost\" is not host:port"}},
		{"bad level", func(c *Config) { c.Log.Level = "loud" }, []string{"log.level: \"loud\""}},
		{"bad format", func(c *Config) { c.Log.Format = "xml" }, []string{"log.format:"}},
		{"empty topic", func(c *Config) { c.Kafka.Topics.DLQ = "" }, []string{"kafka.topics.dlq: must not be empty"}},
		{"illegal topic", func(c *Config) { c.Kafka.Topics.Reports = "a/b" }, []string{"kafka.topics.reports:"}},
		{"same topic twice", func(c *Config) { c.Kafka.Topics.Reports = c.Kafka.Topics.Events }, []string{"kafka.topics.reports: topic \"keyheat.events\" is also kafka.topics.events"}},
		{"no partitions", func(c *Config) { c.Kafka.Partitions = 0 }, []string{"kafka.partitions:"}},
		{"bad replication", func(c *Config) { c.Kafka.ReplicationFactor = 0 }, []string{"kafka.replication_factor:"}},
		{"sasl unknown", func(c *Config) { c.Kafka.SASL.Mechanism = "gssapi" }, []string{"kafka.sasl.mechanism:"}},
		{"sasl without user", func(c *Config) { c.Kafka.SASL.Mechanism = "scram-sha-512" }, []string{"kafka.sasl.user:"}},
		{"cert without key", func(c *Config) { c.Kafka.TLS.Enabled = true; c.Kafka.TLS.CertFile = "c.pem" }, []string{"kafka.tls.cert_file:"}},
		{"tls files while off", func(c *Config) { c.Kafka.TLS.CAFile = "ca.pem" }, []string{"kafka.tls.enabled:"}},
		{"clickhouse no addr", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.Addr = nil }, []string{"clickhouse.addr: must not be empty"}},
		{"clickhouse bad db", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.Database = "a-b" }, []string{"clickhouse.database:"}},
		{"clickhouse no timeout", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.DialTimeout = 0 }, []string{"clickhouse.dial_timeout:"}},
		{"clickhouse off ignores its keys", func(c *Config) { c.ClickHouse.Addr = nil }, nil},
		{"bad codec", func(c *Config) { c.Events.Codec = "avro" }, []string{"events.codec:"}},
		{"key limit zero", func(c *Config) { c.Events.MaxKeyBytes = 0 }, []string{"events.max_key_bytes:"}},
		{"negative skew", func(c *Config) { c.Events.MaxSkew = -time.Second }, []string{"events.max_skew:"}},
		{"bad metrics addr", func(c *Config) { c.Metrics.Addr = "9090" }, []string{"metrics.addr:"}},
		{"several at once", func(c *Config) {
			c.Kafka.Brokers = nil
			c.Log.Level = "x"
			c.Events.Codec = "y"
		}, []string{"log.level:", "kafka.brokers:", "events.codec:"}},
	}
	runValidateCases(t, tests)
}

// validateCase is one bad configuration and the problems Validate must
// report for it, in order, each as the start of its "key: problem" text.
type validateCase struct {
	name   string
	mutate func(*Config)
	want   []string // nil: valid
}

func runValidateCases(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults()
			tt.mutate(&cfg)
			err := cfg.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var fields []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var fe *FieldError
				require.True(t, errors.As(e, &fe), "every problem is a *FieldError, got %T", e)
				fields = append(fields, fe.Error())
			}
			require.Len(t, fields, len(tt.want), "problems: %q", fields)
			for i, w := range tt.want {
				require.True(t, strings.HasPrefix(fields[i], w), "problem %d = %q, want it to start with %q", i, fields[i], w)
			}
		})
	}
}

func TestClientOpts(t *testing.T) {
	k := Defaults().Kafka
	for _, mech := range []string{"", "plain", "scram-sha-256", "scram-sha-512"} {
		k.SASL = SASL{Mechanism: mech, User: "u", Password: "p"}
		opts, err := k.ClientOpts()
		require.NoError(t, err, mech)
		want := 2
		if mech != "" {
			want = 3
		}
		require.Len(t, opts, want, mech)
	}
	k.SASL = SASL{}
	k.TLS = TLS{Enabled: true, CAFile: filepath.Join(t.TempDir(), "nope.pem")}
	_, err := k.ClientOpts()
	require.ErrorContains(t, err, "kafka.tls.ca_file")

	bad := writeFile(t, "not a pem")
	k.TLS.CAFile = bad
	_, err = k.ClientOpts()
	require.ErrorContains(t, err, "holds no PEM certificate")
}
