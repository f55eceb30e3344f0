package config

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v4"

	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/keylog"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keyheat.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestDefaultsAreValid(t *testing.T) {
	for _, cmd := range append(Commands(), "") {
		cfg, err := Load(cmd, Source{Environ: []string{}})
		require.NoError(t, err, "command %q", cmd)
		require.Equal(t, Defaults(), *cfg)
	}
}

func TestExampleFileDocumentsEveryKey(t *testing.T) {
	const example = "keyheat.example.yaml"
	cfg, err := Load("", Source{File: example, Environ: []string{}})
	require.NoError(t, err, "the example file must load")
	require.Equal(t, Defaults(), *cfg, "the example shows every default; keep them in step")

	var inFile []string
	walkExample(func(key string, _ *yaml.Node) {
		if !isSection(key) {
			inFile = append(inFile, key)
		}
	})
	require.ElementsMatch(t, AllKeys(), inFile)
	for key, help := range keyHelp() {
		if !isSection(key) {
			require.NotEmpty(t, help, "%s has no comment in the example, so its flag has no help", key)
		}
	}
}

// TestExampleGroupsKeysByCommand: the "Read by:" line nearest above each
// key in the example (on the key or a section around it) names exactly
// the commands whose cmd tags say they read it.
func TestExampleGroupsKeysByCommand(t *testing.T) {
	documented := map[string][]Command{}
	walkExample(func(key string, k *yaml.Node) {
		for line := range strings.SplitSeq(k.HeadComment, "\n") {
			_, rest, ok := strings.Cut(line, readByPrefix)
			if !ok {
				continue
			}
			rest = strings.TrimSpace(rest)
			if strings.HasPrefix(rest, "every command") {
				documented[key] = Commands()
				continue
			}
			name, _, _ := strings.Cut(rest, " ")
			for c := range strings.SplitSeq(strings.TrimRight(name, ".,"), ",") {
				documented[key] = append(documented[key], Command(c))
			}
		}
	})
	for _, key := range AllKeys() {
		var doc []Command
		for k := key; k != ""; {
			if d, ok := documented[k]; ok {
				doc = d
				break
			}
			i := strings.LastIndexByte(k, '.')
			if i < 0 {
				break
			}
			k = k[:i]
		}
		require.NotNil(t, doc, "%s: no Read by line on it or a section around it", key)
		require.ElementsMatch(t, readers(key), doc, "%s: the example and the cmd tags disagree on who reads it", key)
	}
}

// TestExampleListsAllowedValues: where a key takes one of a list of values
// that its owning package defines, the example's comment names each.
func TestExampleListsAllowedValues(t *testing.T) {
	var codecs []string
	for _, c := range schemas.Codecs() {
		codecs = append(codecs, c.Name())
	}
	for key, allowed := range map[string][]string{
		"log.level":            LogLevels(),
		"log.format":           LogFormats(),
		"log.keys":             keylog.Policies(),
		"kafka.sasl.mechanism": SASLMechanisms(),
		"events.codec":         codecs,
		"ingest.format":        logparse.Formats(),
		"ingest.compression":   ingest.Compressions(),
	} {
		words := strings.FieldsFunc(keyHelp()[key], func(r rune) bool { return strings.ContainsRune(" ,.;:()/", r) })
		for _, v := range allowed {
			require.Contains(t, words, v, "the comment of %s does not name %q", key, v)
		}
	}
}

// TestFlagsPerCommand: a command's flags are exactly the keys it reads,
// each with its default and the example's comment as help.
func TestFlagsPerCommand(t *testing.T) {
	for _, tc := range []struct {
		cmd          Command
		has, hasNot  []string
		keysFromTags int
	}{
		{CmdIngest, []string{"kafka.brokers", "kafka.topics.events", "events.allow_binary_keys", "ingest.format", "ingest.topic.group"},
			[]string{"clickhouse.addr", "kafka.topics.hotkeys", "kafka.topics.reports"}, 0},
		{CmdDetect, []string{"kafka.brokers", "kafka.topics.hotkeys", "clickhouse.addr", "events.max_skew"},
			[]string{"ingest.format", "ingest.topic.topics"}, 0},
	} {
		t.Run(string(tc.cmd), func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			AddFlags(fs, tc.cmd)
			for _, k := range tc.has {
				require.NotNil(t, fs.Lookup(k), "--%s missing", k)
			}
			for _, k := range tc.hasNot {
				require.Nil(t, fs.Lookup(k), "--%s is not read by %s", k, tc.cmd)
			}
			var flags []string
			fs.VisitAll(func(f *pflag.Flag) {
				if f.Name == "config" {
					return
				}
				flags = append(flags, f.Name)
				require.NotEmpty(t, f.Usage, "--%s has no help", f.Name)
				require.NotContains(t, f.Usage, readByPrefix)
			})
			require.ElementsMatch(t, tc.cmd.Keys(), flags)
			def := Defaults()
			require.Equal(t, fmt.Sprint(valueOf(&def, "kafka.partitions")), fs.Lookup("kafka.partitions").DefValue)
		})
	}
	require.ElementsMatch(t, AllKeys(), slices.Compact(slices.Sorted(slices.Values(append(CmdIngest.Keys(), CmdDetect.Keys()...)))),
		"every key is read by some command")
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, "kafka:\n  brokers: [file:1]\n  client_id: from-file\nlog:\n  level: warn\n")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs, CmdIngest)
	require.NoError(t, fs.Parse([]string{"--kafka.brokers=flag:1,flag:2", "--ingest.topic.topics=flag.raw"}))

	cfg, err := Load(CmdIngest, Source{
		File:    file,
		Flags:   fs,
		Environ: []string{"KEYHEAT_KAFKA_BROKERS=env:1", "KEYHEAT_KAFKA_CLIENT_ID=from-env", "KEYHEAT_EVENTS_MAX_SKEW=90s"},
		Args:    map[string]any{"ingest.topic.topics": []string{"arg.raw"}},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"flag:1", "flag:2"}, cfg.Kafka.Brokers, "a set flag beats env and file")
	require.Equal(t, "from-env", cfg.Kafka.ClientID, "env beats file")
	require.Equal(t, "warn", cfg.Log.Level, "file beats default")
	require.Equal(t, "info", Defaults().Log.Level)
	require.Equal(t, 90*time.Second, cfg.Events.Limits.MaxSkew, "durations parse from env")
	require.Equal(t, "text", cfg.Log.Format, "an unset flag does not override the default")
	require.Equal(t, []string{"arg.raw"}, cfg.Ingest.Topic.Topics, "arguments beat flags")
}

// TestArgsAreValidated: values from arguments meet the same checks.
func TestArgsAreValidated(t *testing.T) {
	_, err := Load(CmdIngest, Source{Environ: []string{}, Args: map[string]any{"ingest.topic.topics": []string{"keyheat.events"}}})
	require.EqualError(t, err, `ingest.topic.topics: "keyheat.events" is also an output topic (kafka.topics.events or .dlq); read a raw log topic`)
	_, err = Load(CmdIngest, Source{Environ: []string{}, Args: map[string]any{"ingest.topicz": "x"}})
	require.ErrorContains(t, err, "ingest.topicz, which is not a config key")
}

// Every key must be settable from the environment: viper ignores env vars
// for keys it does not know, which is the gap Load closes.
func TestEveryKeyFromEnv(t *testing.T) {
	// Load reads clickhouse.tls's files: they must hold what they name.
	certs := testenv.NewTestCerts(t, "env.keyheat.test")
	files := map[string]string{"clickhouse.tls.ca_file": certs.CAFile,
		"clickhouse.tls.cert_file": certs.CertFile, "clickhouse.tls.key_file": certs.KeyFile}
	value := func(key, v string) string {
		if f, ok := files[key]; ok {
			return f
		}
		return v
	}
	for _, key := range AllKeys() {
		t.Run(key, func(t *testing.T) {
			env := []string{EnvName(key) + "=" + value(key, sampleValue(key))}
			for _, extra := range companions[key] {
				k, v, _ := strings.Cut(extra, "=")
				env = append(env, EnvName(k)+"="+value(k, v))
			}
			cfg, err := Load("", Source{Environ: env})
			require.NoError(t, err)
			def := Defaults()
			require.NotEqual(t, fmt.Sprint(valueOf(&def, key)), fmt.Sprint(valueOf(cfg, key)),
				"%s from env changed nothing", EnvName(key))
		})
	}
}

// companions are the other keys a sample value needs to form a valid
// config (a SASL mechanism needs a user).
var companions = map[string][]string{
	"kafka.sasl.mechanism":                {"kafka.sasl.user=u"},
	"kafka.tls.ca_file":                   {"kafka.tls.enabled=true"},
	"kafka.tls.cert_file":                 {"kafka.tls.enabled=true", "kafka.tls.key_file=k.pem"},
	"kafka.tls.key_file":                  {"kafka.tls.enabled=true", "kafka.tls.cert_file=c.pem"},
	"kafka.tls.server_name":               {"kafka.tls.enabled=true"},
	"ingest.regex.pattern":                {"ingest.format=regex"},
	"ingest.combined.key":                 {"ingest.combined.query_param=k"},
	"kafka.tls.insecure_skip_verify":      {"kafka.tls.enabled=true"},
	"clickhouse.tls.ca_file":              {"clickhouse.tls.enabled=true"},
	"clickhouse.tls.cert_file":            {"clickhouse.tls.enabled=true", "clickhouse.tls.key_file=k.pem"},
	"clickhouse.tls.key_file":             {"clickhouse.tls.enabled=true", "clickhouse.tls.cert_file=c.pem"},
	"clickhouse.tls.server_name":          {"clickhouse.tls.enabled=true"},
	"clickhouse.tls.insecure_skip_verify": {"clickhouse.tls.enabled=true"},
	"events.allow_binary_keys":            {"events.codec=binary"},
	"detect.regex_topics":                 {"detect.topics=app\\..*"},
	"detect.regex.pattern":                {"detect.format=regex"},
	"detect.combined.key":                 {"detect.combined.query_param=k"},
	"api.protect_reads":                   {"api.token=t0ken"},
}

// sampleValue returns a valid value for key that differs from its default,
// chosen by the key's type, or by the key where only some values are valid.
func sampleValue(key string) string {
	special := map[string]string{
		"log.level":                     "debug",
		"log.format":                    "json",
		"log.keys":                      "raw",
		"metrics.addr":                  "127.0.0.1:9999",
		"api.addr":                      "127.0.0.1:9998",
		"kafka.brokers":                 "h1:1,h2:2",
		"clickhouse.addr":               "h1:1,h2:2",
		"kafka.sasl.mechanism":          "plain",
		"events.codec":                  "json",
		"kafka.replication_factor":      "3",
		"ingest.format":                 "json",
		"ingest.compression":            "lz4",
		"ingest.combined.key":           "query",
		"ingest.json.time_format":       "unix_ms",
		"ingest.regex.time_format":      "rfc3339",
		"ingest.regex.pattern":          `(?P<key>\S+)`,
		"ingest.topic.topics":           "raw.a,raw.b",
		"detect.from":                   "2026-01-02T15:04:05Z",
		"detect.keyed":                  "false",
		"detect.format":                 "json",
		"detect.topics":                 "events.a,events.b",
		"detect.combined.key":           "query",
		"detect.json.time_format":       "unix_ms",
		"detect.regex.time_format":      "rfc3339",
		"detect.regex.pattern":          `(?P<key>\S+)`,
		"merge.redis_cluster.ranges":    "[{node: a, first: 0, last: 8191}, {node: b, first: 8192, last: 16383}]",
		"merge.redis_cluster.nodes":     "n1,n2",
		"clickhouse.retry_min":          "200ms",
		"archive.zstd":                  "best",
		"kafka.sasl.password_file":      "keyheat.example.yaml", // any file that is there
		"clickhouse.password_file":      "keyheat.example.yaml",
		"pipeline.detect.slots":         "20",
		"pipeline.detect.gate":          "0.6",
		"pipeline.detect.pre_threshold": "0.25",
		"pipeline.rules":                `[{name: api, key: "user:*", app: shop, window: 2s, rate: 50, ops: reads, alert: false}]`,
		"pipeline.whitelist":            `[{key: "health:*"}]`,
	}
	if v, ok := special[key]; ok {
		return v
	}
	if strings.HasPrefix(key, "kafka.topics.") {
		return "changed." + key[len("kafka.topics."):]
	}
	def := Defaults()
	switch d := valueOf(&def, key).(type) {
	case time.Duration:
		return (d + 42*time.Second).String()
	case int:
		return fmt.Sprint(d + 3)
	case int64:
		return fmt.Sprint(d + 3)
	case float64:
		return fmt.Sprint(d + 3)
	case bool:
		return fmt.Sprint(!d)
	default:
		return "changed"
	}
}

func TestUnknownKeysAreErrors(t *testing.T) {
	file := writeFile(t, "log:\n  level: info\nkafka:\n  brokerz: [a:1]\nlogs: {}\n")
	_, err := Load(CmdIngest, Source{File: file, Environ: []string{}})
	require.EqualError(t, err, "config file "+file+", line 4: kafka.brokerz is not a config key (see keyheat.example.yaml)\n"+
		"config file "+file+", line 5: logs is not a config key (see keyheat.example.yaml)")

	file = writeFile(t, "kafka: a:1\n")
	_, err = Load(CmdIngest, Source{File: file, Environ: []string{}})
	require.EqualError(t, err, "config file "+file+", line 1: kafka is a section; its keys go indented below it")

	_, err = Load(CmdIngest, Source{Environ: []string{"KEYHEAT_KAFKA_BROKERZ=a:1"}})
	require.EqualError(t, err, "environment variable KEYHEAT_KAFKA_BROKERZ: no such config key (see keyheat.example.yaml)")

	// Several problems come as one flat list, one per line.
	_, err = Load(CmdIngest, Source{Environ: []string{"KEYHEAT_KAFKA_BROKERZ=a:1", "KEYHEAT_KAFKA_PARTITIONS=x", "KEYHEAT_INGEST_LINGER=y"}})
	require.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 3, "%v", err)

	_, err = Load(CmdIngest, Source{Environ: []string{"KEYHEAT_TEST_KAFKA=a:1", "KEYHEAT_SERVICES_PORT_OFFSET=100", "KEYHEAT_CONFIG=x.yaml"}})
	require.NoError(t, err, "the scripts' and tests' variables are not config keys")

	_, err = Load(CmdIngest, Source{File: filepath.Join(t.TempDir(), "missing.yaml"), Environ: []string{}})
	require.ErrorContains(t, err, "missing.yaml")
}

// TestOtherCommandsKeys: a file or environment shared with other commands
// may set their keys, even to values only they would refuse; each command
// validates what it reads.
func TestOtherCommandsKeys(t *testing.T) {
	file := writeFile(t, "clickhouse:\n  enabled: true\n  addr: []\nkafka:\n  topics:\n    hotkeys: keyheat.events\ningest:\n  format: syslog\n")
	env := []string{"KEYHEAT_CLICKHOUSE_DATABASE=a-b"}
	_, err := Load(CmdIngest, Source{File: file, Environ: env})
	require.EqualError(t, err, `ingest.format: "syslog" is not one of apache, combined, json, nginx, redis, regex`)
	_, err = Load(CmdDetect, Source{File: file, Environ: env})
	require.EqualError(t, err, "kafka.topics.hotkeys: topic \"keyheat.events\" is also kafka.topics.events; every topic must be distinct\n"+
		"clickhouse.addr: must not be empty when clickhouse.enabled is true\n"+
		"clickhouse.database: \"a-b\" must be letters, digits and underscores, not starting with a digit")

	cfg, err := Load(CmdIngest, Source{Environ: []string{"KEYHEAT_CLICKHOUSE_ADDR=127.0.0.1:19000"}})
	require.NoError(t, err, "a variable of detect's in ingest's environment is fine")
	require.Equal(t, []string{"127.0.0.1:19000"}, cfg.ClickHouse.Addr)
}

// TestUserErrors are the mistakes of a first trial, each reported once,
// saying what to do, where.
func TestUserErrors(t *testing.T) {
	flags := func(args ...string) Source {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		AddFlags(fs, CmdIngest)
		require.NoError(t, fs.Parse(args))
		return Source{Flags: fs, Environ: []string{}}
	}
	yamlFile := func(body string) (Source, string) {
		p := writeFile(t, body)
		return Source{File: p, Environ: []string{}}, "config file " + p + ": "
	}
	for _, tc := range []struct {
		name string
		src  func() (Source, string)
		want string // after the returned prefix
	}{
		{"port not a number", func() (Source, string) { return flags("--kafka.brokers=127.0.0.1:notaport"), "" },
			`kafka.brokers: "127.0.0.1:notaport": port "notaport" is not a number from 1 to 65535`},
		{"port out of range", func() (Source, string) { return flags("--kafka.brokers=h:70000"), "" },
			`kafka.brokers: "h:70000": port "70000" is not a number from 1 to 65535`},
		{"port zero", func() (Source, string) { return flags("--kafka.brokers=h:0"), "" },
			`kafka.brokers: "h:0": port "0" is not a number from 1 to 65535`},
		{"no port", func() (Source, string) { return flags("--kafka.brokers=localhost"), "" },
			`kafka.brokers: "localhost" is not host:port, e.g. 127.0.0.1:9092`},
		{"only a comma", func() (Source, string) { return flags("--kafka.brokers=,"), "" },
			"kafka.brokers: must not be empty: name at least one broker as host:port"},
		{"the same bad broker twice", func() (Source, string) { return flags("--kafka.brokers=x,x"), "" },
			`kafka.brokers: "x" is not host:port, e.g. 127.0.0.1:9092`},
		{"stray comma", func() (Source, string) { return flags("--kafka.brokers=a:1,,", "--kafka.partitions=0"), "" },
			"kafka.partitions: 0 is outside 1..100000"},
		{"not a number from env", func() (Source, string) {
			return Source{Environ: []string{"KEYHEAT_KAFKA_PARTITIONS=lots"}}, ""
		}, `kafka.partitions: "lots" is not a whole number`},
		{"not a duration from env", func() (Source, string) {
			return Source{Environ: []string{"KEYHEAT_INGEST_LINGER=5"}}, ""
		}, `ingest.linger: "5" is not a duration like 500ms, 5s or 1h30m`},
		{"not a bool from env", func() (Source, string) {
			return Source{Environ: []string{"KEYHEAT_KAFKA_CREATE_TOPICS=yes"}}, ""
		}, `kafka.create_topics: "yes" is not true or false`},
		{"unclosed list", func() (Source, string) {
			return yamlFile("log:\n  level: info\nkafka:\n  brokers: [a:1\n  client_id: x\n")
		}, "line 5, column 12: did not find expected ',' or ']' (while parsing a flow sequence at line 4)"},
		{"bad indentation", func() (Source, string) {
			return yamlFile("log:\n  level: info\n\nkafka:\n   brokers: [a:1]\n  client_id: y\n")
		}, "line 6, column 3: did not find expected key (while parsing a block mapping at line 1)"},
		{"tab", func() (Source, string) { return yamlFile("log:\n\tlevel: info\n") }, "line 2, column 1: a tab; YAML indents with spaces only"},
		{"key twice", func() (Source, string) { return yamlFile("log:\n  level: info\n  level: warn\n") }, `line 3, column 3: mapping key "level" already defined at line 2`},
		{"list for a number", func() (Source, string) { return yamlFile("kafka:\n  partitions: [1]\n") }, ""},
		{"fraction for a number", func() (Source, string) { return yamlFile("kafka:\n  partitions: 3.5\n") }, ""},
		{"bool for a number", func() (Source, string) { return yamlFile("kafka:\n  partitions: true\n") }, ""},
		{"number for a bool", func() (Source, string) { return yamlFile("kafka:\n  create_topics: 1\n") }, ""},
		{"number for a list", func() (Source, string) { return yamlFile("kafka:\n  brokers: 5\n") }, ""},
		{"unquoted duration", func() (Source, string) { return yamlFile("ingest:\n  topic:\n    commit_interval: 5\n") }, ""},
		{"binary keys with json", func() (Source, string) {
			return Source{Environ: []string{"KEYHEAT_EVENTS_CODEC=json", "KEYHEAT_EVENTS_ALLOW_BINARY_KEYS=true"}}, ""
		}, "events.allow_binary_keys: needs events.codec: binary (the json codec carries only UTF-8 keys)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, prefix := tc.src()
			_, err := Load(CmdIngest, src)
			require.Error(t, err)
			if tc.want == "" {
				require.NotContains(t, err.Error(), "\n", "one problem, one line: %v", err)
				require.NotContains(t, err.Error(), "unconvertible", "in the user's words, not Go's: %v", err)
				require.NotContains(t, err.Error(), "strconv", "in the user's words, not Go's: %v", err)
				return
			}
			require.Equal(t, prefix+tc.want, err.Error())
		})
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	tests := []validateCase{
		{"no brokers", func(c *Config) { c.Kafka.Brokers = nil }, []string{"kafka.brokers: must not be empty"}},
		{"broker without port", func(c *Config) { c.Kafka.Brokers = []string{"localhost"} }, []string{"kafka.brokers: \"localhost\" is not host:port"}},
		{"bad level", func(c *Config) { c.Log.Level = "loud" }, []string{`log.level: "loud" is not one of debug, info, warn, error`}},
		{"bad format", func(c *Config) { c.Log.Format = "xml" }, []string{"log.format:"}},
		{"bad log keys", func(c *Config) { c.Log.Keys = "plain" }, []string{`log.keys: "plain" is not one of hash, raw`}},
		{"raw log keys", func(c *Config) { c.Log.Keys = "raw" }, nil},
		{"empty topic", func(c *Config) { c.Kafka.Topics.DLQ = "" }, []string{"kafka.topics.dlq: must not be empty"}},
		{"illegal topic", func(c *Config) { c.Kafka.Topics.Reports = "a/b" }, []string{"kafka.topics.reports:"}},
		{"same topic twice", func(c *Config) { c.Kafka.Topics.Reports = c.Kafka.Topics.Events }, []string{"kafka.topics.reports: topic \"keyheat.events\" is also kafka.topics.events"}},
		{"no partitions", func(c *Config) { c.Kafka.Partitions = 0 }, []string{"kafka.partitions:"}},
		{"bad replication", func(c *Config) { c.Kafka.ReplicationFactor = 0 }, []string{"kafka.replication_factor:"}},
		{"sasl unknown", func(c *Config) { c.Kafka.SASL.Mechanism = "gssapi" }, []string{`kafka.sasl.mechanism: "gssapi" is not one of plain, scram-sha-256, scram-sha-512`}},
		{"sasl without user", func(c *Config) { c.Kafka.SASL.Mechanism = "scram-sha-512" }, []string{"kafka.sasl.user:"}},
		{"cert without key", func(c *Config) { c.Kafka.TLS.Enabled = true; c.Kafka.TLS.CertFile = "c.pem" }, []string{"kafka.tls.cert_file:"}},
		{"tls files while off", func(c *Config) { c.Kafka.TLS.CAFile = "ca.pem" }, []string{"kafka.tls.enabled:"}},
		{"skip verify while off", func(c *Config) { c.Kafka.TLS.InsecureSkipVerify = true }, []string{"kafka.tls.enabled:"}},
		{"clickhouse no addr", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.Addr = nil }, []string{"clickhouse.addr: must not be empty"}},
		{"clickhouse bad port", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.Addr = []string{"h:x"} }, []string{`clickhouse.addr: "h:x": port "x"`}},
		{"clickhouse bad db", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.Database = "a-b" }, []string{"clickhouse.database:"}},
		{"clickhouse no timeout", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.DialTimeout = 0 }, []string{"clickhouse.dial_timeout:"}},
		{"clickhouse off ignores its keys", func(c *Config) { c.ClickHouse.Addr = nil }, nil},
		{"clickhouse cert without key", func(c *Config) { c.ClickHouse.TLS.Enabled = true; c.ClickHouse.TLS.CertFile = "c.pem" }, []string{"clickhouse.tls.cert_file:"}},
		{"clickhouse tls files while off", func(c *Config) { c.ClickHouse.TLS.CAFile = "ca.pem" }, []string{"clickhouse.tls.enabled:"}},
		{"clickhouse skip verify while off", func(c *Config) { c.ClickHouse.TLS.InsecureSkipVerify = true }, []string{"clickhouse.tls.enabled:"}},
		{"bad codec", func(c *Config) { c.Events.Codec = "avro" }, []string{`events.codec: unknown event codec "avro": use "json" or "binary"`}},
		{"key limit zero", func(c *Config) { c.Events.Limits.MaxKeyBytes = 0 }, []string{"events.max_key_bytes:"}},
		{"negative skew", func(c *Config) { c.Events.Limits.MaxSkew = -time.Second }, []string{"events.max_skew:"}},
		{"skew off", func(c *Config) { c.Events.Limits.MaxSkew = 0 }, nil},
		{"binary keys with the binary codec", func(c *Config) { c.Events.Codec = "binary"; c.Events.Limits.AllowBinaryKeys = true }, nil},
		{"binary keys with json", func(c *Config) { c.Events.Codec = "json"; c.Events.Limits.AllowBinaryKeys = true }, []string{"events.allow_binary_keys: needs events.codec: binary"}},
		{"binary keys with an unknown codec: one problem", func(c *Config) { c.Events.Codec = "avro"; c.Events.Limits.AllowBinaryKeys = true }, []string{"events.codec:"}},
		{"bad metrics addr", func(c *Config) { c.Metrics.Addr = "9090" }, []string{"metrics.addr:"}},
		{"metrics on a free port", func(c *Config) { c.Metrics.Addr = "127.0.0.1:0" }, nil},
		{"several at once", func(c *Config) {
			c.Kafka.Brokers = nil
			c.Log.Level = "x"
			c.Events.Codec = "y"
		}, []string{"log.level:", "kafka.brokers:", "events.codec:"}},
	}
	runValidateCases(t, "", tests)
}

// validateCase is one bad configuration and the problems Validate must
// report for it, in order, each as the start of its "key: problem" text.
type validateCase struct {
	name   string
	mutate func(*Config)
	want   []string // nil: valid
}

func runValidateCases(t *testing.T, cmd Command, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Defaults()
			tt.mutate(&cfg)
			err := cfg.Validate(cmd)
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
	for _, mech := range append(SASLMechanisms(), "") {
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

// TestServicesEnv: what `scripts/services.sh env` prints points the
// commands at the test services and holds nothing Load refuses.
func TestServicesEnv(t *testing.T) {
	cmd := exec.Command("bash", "../scripts/services.sh", "env")
	cmd.Env = append(os.Environ(), "KEYHEAT_SERVICES_PORT_OFFSET=7", "KEYHEAT_SERVICES_DIR="+t.TempDir())
	out, err := cmd.Output()
	require.NoError(t, err)
	vars := map[string]string{}
	var environ []string
	for line := range strings.Lines(string(out)) {
		kv, ok := strings.CutPrefix(strings.TrimSpace(line), "export ")
		require.True(t, ok, "not an export line: %q", line)
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
		environ = append(environ, kv)
	}
	cfg, err := Load(CmdIngest, Source{Environ: environ})
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:19099"}, cfg.Kafka.Brokers)
	require.Equal(t, []string{vars["KEYHEAT_TEST_KAFKA"]}, cfg.Kafka.Brokers)
	require.Equal(t, []string{vars["KEYHEAT_TEST_CLICKHOUSE"]}, cfg.ClickHouse.Addr)
}
