package config

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/pipeline"
)

// TestValidateDetectNamesEveryProblem table-tests bad combinations of the
// sections detect reads, each named by its key. The rules belong to the
// options types; this checks each problem surfaces under its config key.
func TestValidateDetectNamesEveryProblem(t *testing.T) {
	tests := []validateCase{
		{"defaults", func(*Config) {}, nil},
		{"bad from", func(c *Config) { c.Detect.From = "yesterday" }, []string{`detect.from: "yesterday" is not earliest, latest or an RFC 3339 time`}},
		{"from a time", func(c *Config) { c.Detect.From = "2026-01-02T15:04:05+01:00" }, nil},
		{"bad keyed", func(c *Config) { c.Detect.Keyed = "maybe" }, []string{`detect.keyed: "maybe" is not one of auto, true, false`}},
		{"bad format", func(c *Config) { c.Detect.Parse.Format = "syslog" }, []string{`detect.format: "syslog": want empty (AccessEvent records) or one of`}},
		{"raw nginx logs", func(c *Config) { c.Detect.Parse.Format = "nginx" }, nil},
		{"regex without pattern", func(c *Config) { c.Detect.Parse.Format = "regex" }, []string{"detect.regex: pattern must be set"}},
		{"json without key", func(c *Config) { c.Detect.Parse.Format = "json"; c.Detect.Parse.JSON.Key = "" }, []string{"detect.json: the key field path must be set"}},
		{"one group for both", func(c *Config) { c.Detect.MergeGroup = c.Detect.Group }, []string{`detect.merge_group: "keyheat-detect" is also detect.group`}},
		{"illegal group", func(c *Config) { c.Detect.Group = "a b" }, []string{"detect.group:"}},
		{"reads its own output", func(c *Config) { c.Detect.Topics = []string{"keyheat.windows"} }, []string{`detect.topics: "keyheat.windows" is also kafka.topics.windows`}},
		{"illegal topic", func(c *Config) { c.Detect.Topics = []string{"a/b"} }, []string{"detect.topics:"}},
		{"regex topics", func(c *Config) { c.Detect.RegexTopics = true; c.Detect.Topics = []string{`^app\..*\.events$`} }, nil},
		{"bad regex", func(c *Config) { c.Detect.RegexTopics = true; c.Detect.Topics = []string{`(`} }, []string{`detect.topics: "(" is not a regular expression`}},
		{"regex without topics", func(c *Config) { c.Detect.RegexTopics = true }, []string{"detect.regex_topics:"}},
		{"no commit interval", func(c *Config) { c.Detect.CommitInterval = 0 }, []string{"detect.commit_interval:"}},
		{"no flush timeout", func(c *Config) { c.Detect.FlushTimeout = -time.Second }, []string{"detect.flush_timeout:"}},
		{"no poll", func(c *Config) { c.Detect.MaxPollRecords = 0 }, []string{"detect.max_poll_records:"}},
		{"session timeout", func(c *Config) { c.Detect.SessionTimeout = 100 * time.Millisecond }, []string{"detect.session_timeout: 100ms: want at least 1s"}},
		{"session timeout too long", func(c *Config) { c.Detect.SessionTimeout = time.Hour }, []string{"detect.session_timeout: 1h0m0s: want at least 1s and at most 30m"}},
		{"instance id none", func(c *Config) { c.Detect.InstanceID = "none" }, nil},
		{"instance id set", func(c *Config) { c.Detect.InstanceID = "detect-eu-1" }, nil},
		{"illegal instance id", func(c *Config) { c.Detect.InstanceID = "a b" }, []string{`detect.instance_id: "a b" has ' '`}},
		{"empty instance id", func(c *Config) { c.Detect.InstanceID = "" }, []string{"detect.instance_id: must not be empty; or auto"}},
		{"top_n", func(c *Config) { c.Merge.TopN = 0 }, []string{"merge.top_n: 0, want 1..10000"}},
		{"nodes and shards", func(c *Config) {
			c.Merge.RedisCluster.Nodes = []string{"a"}
			c.Merge.RedisCluster.Shards = 2
		}, []string{"merge: redis_cluster.nodes, shards and ranges: set one of them"}},
		{"ranges", func(c *Config) {
			c.Merge.RedisCluster.Ranges = []pipeline.NodeSlots{{Node: "a", First: 0, Last: 16383}}
		}, nil},
		{"clickhouse batch", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.BatchRows = 0 }, []string{"clickhouse.batch_rows: must be positive"}},
		{"clickhouse buffer below batch", func(c *Config) { c.ClickHouse.Enabled = true; c.ClickHouse.MaxBufferedRows = 10 },
			[]string{"clickhouse.max_buffered_rows: 10 is below batch_rows 10000"}},
		{"clickhouse off ignores its keys", func(c *Config) { c.ClickHouse.BatchRows = 0 }, nil},
		{"archive zstd", func(c *Config) { c.Archive.Root = "/var/lib/keyheat"; c.Archive.Zstd = "max" }, []string{`archive.zstd: "max", want fastest, default, better or best`}},
		{"archive segment", func(c *Config) { c.Archive.Root = "/var/lib/keyheat"; c.Archive.SegmentBytes = 1 }, []string{"archive.segment_bytes: 1, want at least 1024"}},
		{"archive off ignores its keys", func(c *Config) { c.Archive.Zstd = "max" }, nil},
		{"slots", func(c *Config) { c.Pipeline.Detect.Slots = 0 }, []string{"pipeline.detect.slots: 0, want 1 to 64"}},
		{"rule without rate", func(c *Config) { c.Pipeline.Rules[0].Rate = 0 }, []string{"pipeline.rules: rules[0] (default): set rate"}},
		{"report window", func(c *Config) { c.Pipeline.Window = 0 }, []string{"pipeline.window: 0s, want a positive whole number"}},
	}
	runValidateCases(t, CmdDetect, tests)
}

// TestDetectKeysOnlyForDetect: ingest does not validate detect's sections.
func TestDetectKeysOnlyForDetect(t *testing.T) {
	cfg := Defaults()
	cfg.Detect.Keyed = "maybe"
	cfg.Merge.TopN = 0
	require.Error(t, cfg.Validate(CmdDetect))
	require.NoError(t, cfg.Validate(CmdIngest))
}

// TestListOfSectionsFromText: a list of sections comes from a flag or
// the environment as YAML text, and its flag shows the default that way.
func TestListOfSectionsFromText(t *testing.T) {
	cfg, err := Load(CmdDetect, Source{Environ: []string{
		"KEYHEAT_MERGE_REDIS_CLUSTER_RANGES=[{node: a, first: 0, last: 8191}, {node: b, first: 8192, last: 16383}]"}})
	require.NoError(t, err)
	require.Equal(t, []pipeline.NodeSlots{{Node: "a", First: 0, Last: 8191}, {Node: "b", First: 8192, Last: 16383}},
		cfg.Merge.RedisCluster.Ranges)

	_, err = Load(CmdDetect, Source{Environ: []string{"KEYHEAT_MERGE_REDIS_CLUSTER_RANGES={node: a}"}})
	require.ErrorContains(t, err, "merge.redis_cluster.ranges: \"{node: a}\" is not a list")
	_, err = Load(CmdDetect, Source{Environ: []string{"KEYHEAT_MERGE_REDIS_CLUSTER_RANGES=[{node: a"}})
	require.ErrorContains(t, err, "is not YAML like")

	require.Equal(t, "[]", flowYAML([]pipeline.NodeSlots(nil)))
	require.Equal(t, "[{first: 1, last: 2, node: a}]", flowYAML([]pipeline.NodeSlots{{Node: "a", First: 1, Last: 2}}))
}

// TestRulesFromFile: rules are a list of sections in the file, with
// durations and an optional alert flag; a flag takes them as YAML text.
func TestRulesFromFile(t *testing.T) {
	file := writeFile(t, `pipeline:
  rules:
    - {name: api, key: "user:*", app: shop, window: 2s, rate: 50, ops: reads}
    - name: quiet
      key: "*"
      window: 500ms
      bytes_rate: 1000000
      alert: false
  whitelist: [{key: "health:*"}]
`)
	cfg, err := Load(CmdDetect, Source{File: file, Environ: []string{}})
	require.NoError(t, err)
	no := false
	require.Equal(t, []pipeline.Rule{
		{Name: "api", Key: "user:*", App: "shop", Window: 2 * time.Second, Rate: 50, Ops: "reads"},
		{Name: "quiet", Key: "*", Window: 500 * time.Millisecond, BytesRate: 1e6, Alert: &no},
	}, cfg.Pipeline.Rules)
	require.Equal(t, []pipeline.KeyMatch{{Key: "health:*"}}, cfg.Pipeline.Whitelist)

	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlags(fs, CmdDetect)
	require.Equal(t, `[{key: '*', name: default, ops: all, rate: 1000, window: 1s}]`, fs.Lookup("pipeline.rules").DefValue)
	require.NoError(t, fs.Parse([]string{`--pipeline.rules=[{name: x, key: "a:*", window: 1s, rate: 5}]`}))
	cfg, err = Load(CmdDetect, Source{Flags: fs, Environ: []string{}})
	require.NoError(t, err)
	require.Equal(t, []pipeline.Rule{{Name: "x", Key: "a:*", Window: time.Second, Rate: 5}}, cfg.Pipeline.Rules)
}
