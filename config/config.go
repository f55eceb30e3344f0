package config

import (
	"time"
)

// Config is everything a keyheat command can be configured with. Each
// section maps to one top-level key of the YAML file.
type Config struct {
	Log        Log        `mapstructure:"log"`
	Metrics    Metrics    `mapstructure:"metrics"`
	Kafka      Kafka      `mapstructure:"kafka"`
	ClickHouse ClickHouse `mapstructure:"clickhouse"`
	Events     Events     `mapstructure:"events"`
	Ingest     Ingest     `mapstructure:"ingest"`
}

// Log configures the slog logger every command writes to standard error.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `mapstructure:"level"`
	// Format is text (for people) or json (for log shippers).
	Format string `mapstructure:"format"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Addr is the host:port serving /metrics; empty disables the endpoint.
	Addr string `mapstructure:"addr"`
}

// Kafka says how to reach the brokers and which topics keyheat uses.
type Kafka struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string `mapstructure:"brokers"`
	// ClientID is sent to the brokers; it shows in their logs and quotas.
	ClientID string `mapstructure:"client_id"`
	Topics   Topics `mapstructure:"topics"`
	// CreateTopics creates keyheat's topics at start when they are
	// missing, with Partitions and ReplicationFactor. Off, a missing topic
	// is an error at start rather than records failing one by one.
	CreateTopics bool `mapstructure:"create_topics"`
	// Partitions of a topic keyheat creates. The events topic's partition
	// count is detect's parallelism: one worker per partition.
	Partitions int `mapstructure:"partitions"`
	// ReplicationFactor of a topic keyheat creates; -1 uses the broker's
	// default.replication.factor.
	ReplicationFactor int  `mapstructure:"replication_factor"`
	SASL              SASL `mapstructure:"sasl"`
	TLS               TLS  `mapstructure:"tls"`
}

// Topics names keyheat's Kafka topics.
type Topics struct {
	// Events carries AccessEvents keyed by access key.
	Events string `mapstructure:"events"`
	// DLQ carries dead-letter records for input that could not be used.
	DLQ string `mapstructure:"dlq"`
	// Hotkeys is the compacted registry of hot keys that apps subscribe to.
	Hotkeys string `mapstructure:"hotkeys"`
	// Windows is the internal hand-over of per-partition window summaries.
	Windows string `mapstructure:"windows"`
	// Reports carries the merged cluster-wide window reports.
	Reports string `mapstructure:"reports"`
}

// SASL configures broker authentication.
type SASL struct {
	// Mechanism is empty (no SASL), plain, scram-sha-256 or scram-sha-512.
	Mechanism string `mapstructure:"mechanism"`
	User      string `mapstructure:"user"`
	Password  string `mapstructure:"password"`
}

// TLS configures encryption to the brokers.
type TLS struct {
	Enabled bool `mapstructure:"enabled"`
	// CAFile is a PEM bundle of CAs to trust; empty means the system pool.
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are a client certificate for mutual TLS; both
	// or neither.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ServerName overrides the name checked against the broker's
	// certificate; empty means the broker's host.
	ServerName string `mapstructure:"server_name"`
	// InsecureSkipVerify disables certificate checks. For tests only.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// ClickHouse configures the report store.
type ClickHouse struct {
	// Enabled turns the ClickHouse sink on.
	Enabled bool `mapstructure:"enabled"`
	// Addr are native-protocol addresses, host:port (9000 by default on
	// a server; the HTTP port does not work with ClickHouse 18.16).
	Addr        []string      `mapstructure:"addr"`
	Database    string        `mapstructure:"database"`
	User        string        `mapstructure:"user"`
	Password    string        `mapstructure:"password"`
	DialTimeout time.Duration `mapstructure:"dial_timeout"`
}

// Events configures how events are encoded and which are accepted.
type Events struct {
	// Codec is the wire encoding written to the events topic: json or
	// binary. Readers accept both.
	Codec string `mapstructure:"codec"`
	// MaxKeyBytes rejects (dead-letters) keys longer than this.
	MaxKeyBytes int `mapstructure:"max_key_bytes"`
	// MaxSkew rejects events whose time is further than this from now;
	// 0 disables the check (for replays of old logs).
	MaxSkew time.Duration `mapstructure:"max_skew"`
}

// Ingest configures cmd/ingest: how lines are parsed and produced.
type Ingest struct {
	// Format is the log format: json, combined (nginx, apache), redis or regex.
	Format string `mapstructure:"format"`
	// App is the app of events whose line names none.
	App      string         `mapstructure:"app"`
	JSON     IngestJSON     `mapstructure:"json"`
	Combined IngestCombined `mapstructure:"combined"`
	Regex    IngestRegex    `mapstructure:"regex"`
	// Compression of produced batches: zstd, lz4, snappy, gzip or none.
	Compression string `mapstructure:"compression"`
	// Linger is how long a batch waits to fill.
	Linger time.Duration `mapstructure:"linger"`
	// MaxBufferedRecords bounds records awaiting acknowledgement; reading
	// waits beyond it.
	MaxBufferedRecords int `mapstructure:"max_buffered_records"`
	// MaxLineBytes dead-letters longer lines (reason line_too_long).
	MaxLineBytes int `mapstructure:"max_line_bytes"`
	// DLQMaxRaw bounds the copy of a bad line in its dead letter.
	DLQMaxRaw int `mapstructure:"dlq_max_raw"`
	// StateFile keeps tail positions across restarts; empty keeps none.
	StateFile string `mapstructure:"state_file"`
	// PollInterval is how often an idle tailed file is checked.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// SaveInterval is how often the state file is rewritten.
	SaveInterval time.Duration `mapstructure:"save_interval"`
	// ReadBackMaxRecords caps the records a tail start reads back from
	// the output topics to skip lines the last run already sent; beyond
	// it those lines are sent again.
	ReadBackMaxRecords int `mapstructure:"readback_max_records"`
	// Topic configures ingest topic, which re-keys raw log topics.
	Topic IngestTopic `mapstructure:"topic"`
}

// IngestTopic configures ingest topic: a consumer group reading raw log
// topics and re-publishing their records as keyed events.
type IngestTopic struct {
	// Topics are the raw log topics read; arguments on the command line
	// replace them. Each must differ from kafka.topics.events and .dlq.
	Topics []string `mapstructure:"topics"`
	// Group is the consumer group; its committed offsets say where a
	// restart resumes.
	Group string `mapstructure:"group"`
	// CommitInterval is how often acknowledged offsets are committed (also
	// the most a crash can re-send).
	CommitInterval time.Duration `mapstructure:"commit_interval"`
}

// IngestJSON are the dotted field paths of the json format.
type IngestJSON struct {
	Key        string `mapstructure:"key"`
	Time       string `mapstructure:"time"`
	Op         string `mapstructure:"op"`
	Bytes      string `mapstructure:"bytes"`
	App        string `mapstructure:"app"`
	Status     string `mapstructure:"status"`
	Client     string `mapstructure:"client"`
	Node       string `mapstructure:"node"`
	LatencyUs  string `mapstructure:"latency_us"`
	TimeFormat string `mapstructure:"time_format"`
}

// IngestCombined configures the nginx/Apache combined format.
type IngestCombined struct {
	// Key is path, path_noquery or query.
	Key string `mapstructure:"key"`
	// QueryParam is the parameter holding the key when Key is query.
	QueryParam string `mapstructure:"query_param"`
}

// IngestRegex configures the regex format.
type IngestRegex struct {
	// Pattern is an RE2 expression with a (?P<key>…) group.
	Pattern    string `mapstructure:"pattern"`
	TimeFormat string `mapstructure:"time_format"`
}

// Defaults returns the configuration used for every key nobody set.
func Defaults() Config {
	return Config{
		Log: Log{Level: "info", Format: "text"},
		Kafka: Kafka{
			Brokers:           []string{"127.0.0.1:9092"},
			ClientID:          "keyheat",
			CreateTopics:      true,
			Partitions:        8,
			ReplicationFactor: -1,
			Topics: Topics{
				Events:  "keyheat.events",
				DLQ:     "keyheat.events.dlq",
				Hotkeys: "keyheat.hotkeys",
				Windows: "keyheat.windows",
				Reports: "keyheat.reports",
			},
		},
		ClickHouse: ClickHouse{
			Addr:        []string{"127.0.0.1:9000"},
			Database:    "keyheat",
			User:        "default",
			DialTimeout: 5 * time.Second,
		},
		Events: Events{
			Codec:       "json",
			MaxKeyBytes: 1024,
			MaxSkew:     7 * 24 * time.Hour,
		},
		Ingest: Ingest{
			Format: "combined",
			JSON: IngestJSON{Key: "key", Time: "time", Op: "op", Bytes: "bytes", App: "app", Status: "status",
				Client: "client", Node: "node", LatencyUs: "latency_us", TimeFormat: "auto"},
			Combined:           IngestCombined{Key: "path_noquery"},
			Regex:              IngestRegex{TimeFormat: "auto"},
			Compression:        "zstd",
			Linger:             5 * time.Millisecond,
			MaxBufferedRecords: 100000,
			MaxLineBytes:       1 << 20,
			DLQMaxRaw:          16 << 10,
			PollInterval:       200 * time.Millisecond,
			SaveInterval:       time.Second,
			ReadBackMaxRecords: 1_000_000,
			Topic:              IngestTopic{Topics: []string{}, Group: "keyheat-ingest", CommitInterval: time.Second},
		},
	}
}
