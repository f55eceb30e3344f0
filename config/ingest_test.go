package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestValidateIngestNamesEveryProblem table-tests every bad combination of
// the ingest section, each named by its key, and the good ones next to them.
func TestValidateIngestNamesEveryProblem(t *testing.T) {
	tests := []validateCase{
		{"unknown format", func(c *Config) { c.Ingest.Format = "syslog" }, []string{`ingest.format: "syslog" is not one of`}},
		{"format aliases", func(c *Config) { c.Ingest.Format = "nginx" }, nil},
		{"regex without pattern", func(c *Config) { c.Ingest.Format = "regex" }, []string{"ingest.regex.pattern: must be set"}},
		{"regex with pattern", func(c *Config) { c.Ingest.Format = "regex"; c.Ingest.Regex.Pattern = `(?P<key>\S+)` }, nil},
		{"json without key", func(c *Config) { c.Ingest.Format = "json"; c.Ingest.JSON.Key = "" }, []string{"ingest.json.key: must be set"}},
		{"json key unused by other formats", func(c *Config) { c.Ingest.JSON.Key = "" }, nil},
		{"bad combined key", func(c *Config) { c.Ingest.Combined.Key = "host" }, []string{`ingest.combined.key: "host"`}},
		{"query without param", func(c *Config) { c.Ingest.Combined.Key = "query" }, []string{"ingest.combined.query_param: must be set"}},
		{"query with param", func(c *Config) { c.Ingest.Combined.Key = "query"; c.Ingest.Combined.QueryParam = "sku" }, nil},
		{"bad compression", func(c *Config) { c.Ingest.Compression = "brotli" }, []string{`ingest.compression: "brotli"`}},
		{"negative linger", func(c *Config) { c.Ingest.Linger = -time.Millisecond }, []string{"ingest.linger:"}},
		{"zero linger", func(c *Config) { c.Ingest.Linger = 0 }, nil},
		{"no buffer", func(c *Config) { c.Ingest.MaxBufferedRecords = 0 }, []string{"ingest.max_buffered_records:"}},
		{"no line", func(c *Config) { c.Ingest.MaxLineBytes = 0 }, []string{"ingest.max_line_bytes:"}},
		{"no dlq raw", func(c *Config) { c.Ingest.DLQMaxRaw = -1 }, []string{"ingest.dlq_max_raw:"}},
		{"no poll interval", func(c *Config) { c.Ingest.PollInterval = 0 }, []string{"ingest.poll_interval:"}},
		{"no save interval", func(c *Config) { c.Ingest.SaveInterval = -time.Second }, []string{"ingest.save_interval:"}},
		{"no read-back", func(c *Config) { c.Ingest.ReadBackMaxRecords = 0 }, []string{"ingest.readback_max_records:"}},
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
			c.Ingest.Format = "regex"
			c.Ingest.Compression = "x"
			c.Ingest.Topic.Topics = []string{"keyheat.events", "ok"}
			c.Ingest.Topic.CommitInterval = -1
		}, []string{"ingest.regex.pattern:", "ingest.compression:", "ingest.topic.topics:", "ingest.topic.commit_interval:"}},
	}
	runValidateCases(t, tests)
}

// TestIngestTopicFromEnv: the raw topic list splits on commas like the
// brokers do.
func TestIngestTopicFromEnv(t *testing.T) {
	cfg, err := Load(Source{Environ: []string{"KEYHEAT_INGEST_TOPIC_TOPICS=app.raw, db.raw", "KEYHEAT_INGEST_TOPIC_COMMIT_INTERVAL=250ms"}})
	require.NoError(t, err)
	require.Equal(t, []string{"app.raw", "db.raw"}, cfg.Ingest.Topic.Topics)
	require.Equal(t, 250*time.Millisecond, cfg.Ingest.Topic.CommitInterval)
}
