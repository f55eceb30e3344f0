package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestValidateIngestNamesEveryProblem table-tests bad combinations of the
// ingest section, each named by its key, and the good ones next to them.
// The rules themselves belong to the options types (their own tests cover
// each); this checks that each problem surfaces under its config key.
func TestValidateIngestNamesEveryProblem(t *testing.T) {
	tests := []validateCase{
		{"unknown format", func(c *Config) { c.Ingest.Parse.Format = "syslog" }, []string{`ingest.format: "syslog" is not one of apache, combined, json, nginx, redis, regex`}},
		{"format aliases", func(c *Config) { c.Ingest.Parse.Format = "nginx" }, nil},
		{"format in capitals", func(c *Config) { c.Ingest.Parse.Format = "JSON" }, nil},
		{"regex without pattern", func(c *Config) { c.Ingest.Parse.Format = "regex" }, []string{"ingest.regex: pattern must be set"}},
		{"regex with pattern", func(c *Config) { c.Ingest.Parse.Format = "regex"; c.Ingest.Parse.Regex.Pattern = `(?P<key>\S+)` }, nil},
		{"regex that does not compile", func(c *Config) { c.Ingest.Parse.Format = "regex"; c.Ingest.Parse.Regex.Pattern = `(?P<key>\S+` },
			[]string{"ingest.regex: error parsing regexp: missing closing )"}},
		{"regex time format", func(c *Config) {
			c.Ingest.Parse.Format = "regex"
			c.Ingest.Parse.Regex.Pattern = `(?P<key>\S+)`
			c.Ingest.Parse.Regex.TimeFormat = "yesterday"
		}, []string{`ingest.regex: time_format "yesterday" is neither`}},
		{"json without key", func(c *Config) { c.Ingest.Parse.Format = "json"; c.Ingest.Parse.JSON.Key = "" }, []string{"ingest.json: the key field path must be set"}},
		{"json time format", func(c *Config) { c.Ingest.Parse.Format = "json"; c.Ingest.Parse.JSON.TimeFormat = "unix_sec" },
			[]string{`ingest.json: time_format "unix_sec" is neither auto, unix, unix_ms, unix_us, unix_ns, rfc3339 nor a Go time layout`}},
		{"json time layout", func(c *Config) {
			c.Ingest.Parse.Format = "json"
			c.Ingest.Parse.JSON.TimeFormat = "2006-01-02 15:04:05"
		}, nil},
		{"json options unused by other formats", func(c *Config) { c.Ingest.Parse.JSON.Key = ""; c.Ingest.Parse.JSON.TimeFormat = "x" }, nil},
		{"bad combined key", func(c *Config) { c.Ingest.Parse.Combined.Key = "host" }, []string{`ingest.combined: key "host" is not one of`}},
		{"query without param", func(c *Config) { c.Ingest.Parse.Combined.Key = "query" }, []string{`ingest.combined: key "query" needs query_param`}},
		{"query with param", func(c *Config) { c.Ingest.Parse.Combined.Key = "query"; c.Ingest.Parse.Combined.QueryParam = "sku" }, nil},
		{"bad compression", func(c *Config) { c.Ingest.Producer.Compression = "brotli" }, []string{`ingest.compression: "brotli" is not one of zstd, lz4, snappy, gzip, none`}},
		{"negative linger", func(c *Config) { c.Ingest.Producer.Linger = -time.Millisecond }, []string{"ingest.linger:"}},
		{"zero linger", func(c *Config) { c.Ingest.Producer.Linger = 0 }, nil},
		{"no buffer", func(c *Config) { c.Ingest.Producer.MaxBufferedRecords = 0 }, []string{"ingest.max_buffered_records:"}},
		{"no line", func(c *Config) { c.Ingest.Lines.MaxLineBytes = 0 }, []string{"ingest.max_line_bytes:"}},
		{"no dlq raw", func(c *Config) { c.Ingest.Lines.DLQMaxRaw = -1 }, []string{"ingest.dlq_max_raw:"}},
		{"no poll interval", func(c *Config) { c.Ingest.Tail.PollInterval = 0 }, []string{"ingest.poll_interval:"}},
		{"no commit interval", func(c *Config) { c.Ingest.Tail.CommitInterval = -time.Second }, []string{"ingest.commit_interval:"}},
		{"negative rotated idle", func(c *Config) { c.Ingest.Tail.RotatedIdle = -time.Second }, []string{"ingest.rotated_idle:"}},
		{"bad rotated glob", func(c *Config) { c.Ingest.Tail.Rotated = []string{"{name}.[0-9"} }, []string{`ingest.rotated: "{name}.[0-9" is not a glob pattern`}},
		{"no rotated globs", func(c *Config) { c.Ingest.Tail.Rotated = nil }, nil},
		{"illegal tail id", func(c *Config) { c.Ingest.Tail.TailID = "web 1" }, []string{"ingest.tail_id:"}},
		{"tail id", func(c *Config) { c.Ingest.Tail.TailID = "web-1.example" }, nil},
		{"no positions topic", func(c *Config) { c.Ingest.Tail.PositionsTopic = "" }, []string{"ingest.positions_topic: must not be empty"}},
		{"positions topic is the events topic", func(c *Config) { c.Ingest.Tail.PositionsTopic = "keyheat.events" },
			[]string{`ingest.positions_topic: "keyheat.events" is also kafka.topics.events or .dlq`}},
		{"negative stop timeout", func(c *Config) { c.Ingest.Delivery.StopTimeout = -time.Second }, []string{"ingest.stop_timeout:"}},
		{"zero stop timeout", func(c *Config) { c.Ingest.Delivery.StopTimeout = 0 }, nil},
		{"negative end timeout", func(c *Config) { c.Ingest.Delivery.EndTimeout = -time.Second }, []string{"ingest.end_timeout:"}},
		{"negative connect timeout", func(c *Config) { c.Kafka.ConnectTimeout = -time.Second }, []string{"kafka.connect_timeout:"}},
		{"raw topics", func(c *Config) { c.Ingest.Topic.Topics = []string{"app.raw", "db.raw"} }, nil},
		{"raw topic is the events topic", func(c *Config) { c.Ingest.Topic.Topics = []string{"keyheat.events"} }, []string{`ingest.topic.topics: "keyheat.events" is also an output topic`}},
		{"raw topic is the dlq", func(c *Config) { c.Ingest.Topic.Topics = []string{"keyheat.events.dlq"} }, []string{"ingest.topic.topics:"}},
		{"raw topic follows a renamed events topic", func(c *Config) {
			c.Kafka.Topics.Events = "ev"
			c.Ingest.Topic.Topics = []string{"ev"}
		}, []string{`ingest.topic.topics: "ev" is also an output topic`}},
		{"illegal raw topic", func(c *Config) { c.Ingest.Topic.Topics = []string{"a b"} }, []string{"ingest.topic.topics:"}},
		{"empty raw topic", func(c *Config) { c.Ingest.Topic.Topics = []string{""} }, []string{"ingest.topic.topics: must not be empty"}},
		{"raw topic twice", func(c *Config) { c.Ingest.Topic.Topics = []string{"raw", "raw"} }, []string{`ingest.topic.topics: "raw" is named twice`}},
		{"no group", func(c *Config) { c.Ingest.Topic.Group = "" }, []string{"ingest.topic.group: must not be empty"}},
		{"illegal group", func(c *Config) { c.Ingest.Topic.Group = "ingest/1" }, []string{"ingest.topic.group:"}},
		{"no commit interval", func(c *Config) { c.Ingest.Topic.CommitInterval = 0 }, []string{"ingest.topic.commit_interval:"}},
		{"several at once", func(c *Config) {
			c.Ingest.Parse.Format = "regex"
			c.Ingest.Producer.Compression = "x"
			c.Ingest.Topic.Topics = []string{"keyheat.events", "ok"}
			c.Ingest.Topic.CommitInterval = -1
		}, []string{"ingest.regex:", "ingest.compression:", "ingest.topic.commit_interval:", "ingest.topic.topics:"}},
	}
	runValidateCases(t, CmdIngest, tests)
}

// TestIngestKeysOnlyForIngest: detect does not validate the ingest section.
func TestIngestKeysOnlyForIngest(t *testing.T) {
	cfg := Defaults()
	cfg.Ingest.Parse.Format = "syslog"
	require.Error(t, cfg.Validate(CmdIngest))
	require.NoError(t, cfg.Validate(CmdDetect))
}

// TestIngestTopicFromEnv: the raw topic list splits on commas like the
// brokers do.
func TestIngestTopicFromEnv(t *testing.T) {
	cfg, err := Load(CmdIngest, Source{Environ: []string{"KEYHEAT_INGEST_TOPIC_TOPICS=app.raw, db.raw,", "KEYHEAT_INGEST_TOPIC_COMMIT_INTERVAL=250ms"}})
	require.NoError(t, err)
	require.Equal(t, []string{"app.raw", "db.raw"}, cfg.Ingest.Topic.Topics)
	require.Equal(t, 250*time.Millisecond, cfg.Ingest.Topic.CommitInterval)
}
