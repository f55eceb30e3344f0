package config

import (
	"time"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/keylog"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// Config is everything a keyheat command can be configured with. Each
// section maps to one top-level key of the YAML file. Sections that a
// package owns are that package's options types, composed here with the
// key names their mapstructure tags give; the sections below that are
// declared in this package are the ones no library owns (logging,
// metrics, how to reach Kafka).
//
// A cmd tag says which commands read a section or key (see Command);
// without one, every command does.
type Config struct {
	Log        Log                    `mapstructure:"log"`
	Metrics    Metrics                `mapstructure:"metrics"`
	Kafka      Kafka                  `mapstructure:"kafka"`
	Events     Events                 `mapstructure:"events"`
	Ingest     Ingest                 `mapstructure:"ingest" cmd:"ingest"`
	Detect     detect.Options         `mapstructure:"detect" cmd:"detect"`
	Pipeline   pipeline.Options       `mapstructure:"pipeline" cmd:"detect"`
	Merge      pipeline.MergerOptions `mapstructure:"merge" cmd:"detect"`
	ClickHouse ClickHouse             `mapstructure:"clickhouse" cmd:"detect"`
	Archive    archive.Options        `mapstructure:"archive" cmd:"detect"`
	API        controlplane.Options   `mapstructure:"api" cmd:"detect"`
}

// Log configures the slog logger every command writes to standard error.
type Log struct {
	// Level is one of LogLevels.
	Level string `mapstructure:"level"`
	// Format is text (for people) or json (for log shippers).
	Format string `mapstructure:"format"`
	// Keys is how log lines show an access key, one of
	// keylog.Policies: hash (its key_hash only) or raw (the key itself,
	// its key_hash beside it). Standard output meant for a person (detect
	// --print, detect query) is not a log and shows keys as they are.
	Keys string `mapstructure:"keys" cmd:"detect"`
}

// RawKeys reports whether log lines show access keys themselves
// (log.keys: raw).
func (l Log) RawKeys() bool { return l.Keys == keylog.Raw }

// LogLevels are the values log.level accepts.
func LogLevels() []string { return []string{"debug", "info", "warn", "error"} }

// LogFormats are the values log.format accepts.
func LogFormats() []string { return []string{"text", "json"} }

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
	// CreateTopics creates the topics a command writes at start when they
	// are missing, with Partitions and ReplicationFactor. Off, a missing
	// topic is an error at start rather than records failing one by one.
	// Topics a command only reads (detect's events topics) are never
	// created: a typo would otherwise be read, empty, for ever.
	CreateTopics bool `mapstructure:"create_topics"`
	// Partitions of a topic keyheat creates. The events topic's partition
	// count is detect's parallelism: one worker per partition.
	Partitions int `mapstructure:"partitions"`
	// ReplicationFactor of a topic keyheat creates; -1 uses the broker's
	// default.replication.factor.
	ReplicationFactor int `mapstructure:"replication_factor"`
	// ConnectTimeout bounds how long a command waits at start for the
	// brokers to answer; 0 waits as long as it takes (as a broker going
	// away mid-run is waited for).
	ConnectTimeout time.Duration `mapstructure:"connect_timeout" cmd:"ingest"`
	SASL           SASL          `mapstructure:"sasl"`
	TLS            TLS           `mapstructure:"tls"`
}

// Topics names keyheat's Kafka topics.
type Topics struct {
	// Events carries AccessEvents keyed by access key.
	Events string `mapstructure:"events"`
	// DLQ carries dead-letter records for input that could not be used.
	DLQ string `mapstructure:"dlq"`
	// Hotkeys is the compacted registry of hot keys that apps subscribe to.
	Hotkeys string `mapstructure:"hotkeys" cmd:"detect"`
	// Windows is the internal hand-over of per-partition window summaries.
	Windows string `mapstructure:"windows" cmd:"detect"`
	// Reports carries the merged cluster-wide window reports.
	Reports string `mapstructure:"reports" cmd:"detect"`
	// Progress is where detect instances say how far each events
	// partition has come (compacted, one partition): how they keep in
	// step and how the merger tells a slow partition from a gone one.
	Progress string `mapstructure:"progress" cmd:"detect"`
	// ClientStats is where applications' hotkeys.StatsPublisher write
	// their counters (compacted, keyed by client); the operator API sums
	// them per key.
	ClientStats string `mapstructure:"client_stats" cmd:"detect"`
}

// SASL configures broker authentication.
type SASL struct {
	// Mechanism is empty (no SASL) or one of SASLMechanisms.
	Mechanism string `mapstructure:"mechanism"`
	User      string `mapstructure:"user"`
	// Password is the user's password. Load sets it from PasswordFile
	// when that is set; setting both is an error.
	Password string `mapstructure:"password"`
	// PasswordFile is a file holding the password (a mounted secret),
	// read by Load without its trailing line breaks.
	PasswordFile string `mapstructure:"password_file"`
}

// TLS configures encryption to a service: the brokers (kafka.tls) or
// the ClickHouse servers (clickhouse.tls).
type TLS struct {
	Enabled bool `mapstructure:"enabled"`
	// CAFile is a PEM bundle of CAs to trust; empty means the system pool.
	CAFile string `mapstructure:"ca_file"`
	// CertFile and KeyFile are a client certificate for mutual TLS; both
	// or neither.
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ServerName overrides the name checked against the server's
	// certificate; empty means the host dialed.
	ServerName string `mapstructure:"server_name"`
	// InsecureSkipVerify disables certificate checks: anyone on the path
	// can read and change the traffic. For tests only.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify"`
}

// ClickHouse is the clickhouse section: the sink's options, and where
// its password may come from instead.
type ClickHouse struct {
	clickhouse.Options `mapstructure:",squash"`
	// PasswordFile is a file holding Options.Password (a mounted secret),
	// read by Load without its trailing line breaks; setting both is an
	// error.
	PasswordFile string `mapstructure:"password_file"`
	// TLS encrypts the connections to the servers, with the keys of
	// kafka.tls; Load builds Options.TLS from it when it is enabled.
	TLS TLS `mapstructure:"tls"`
}

// Events configures how events are encoded and which are accepted.
type Events struct {
	// Codec is the wire encoding written to the events topic, the Name of
	// one of schemas.Codecs. Readers accept every codec.
	Codec string `mapstructure:"codec"`
	// Limits reject (dead-letter) events: max_key_bytes, max_skew
	// (ingest and a live detect judge times against their clock, detect
	// --exit-at-end against when their records were produced; 0 disables
	// the time checks, for ingesting old logs) and allow_binary_keys
	// (binary codec only).
	Limits schemas.Limits `mapstructure:",squash"`
}

// Ingest configures cmd/ingest. Its keys sit flat under ingest: (and
// ingest.topic: for the topic source), each options type contributing its
// own: how lines are parsed (logparse.Config: format, app, json, combined,
// regex), bounded (ingest.LineOptions) and produced
// (ingest.ProducerOptions), how long Kafka is waited for at the end
// (ingest.DeliveryOptions), and the settings of the tail and topic
// sources.
type Ingest struct {
	Parse    logparse.Config        `mapstructure:",squash"`
	Lines    ingest.LineOptions     `mapstructure:",squash"`
	Producer ingest.ProducerOptions `mapstructure:",squash"`
	Delivery ingest.DeliveryOptions `mapstructure:",squash"`
	Tail     ingest.TailOptions     `mapstructure:",squash"`
	Topic    ingest.TopicOptions    `mapstructure:"topic"`
}

// Defaults returns the configuration used for every key nobody set: the
// owning packages' defaults for their sections, this package's for the
// rest.
func Defaults() Config {
	return Config{
		Log: Log{Level: "info", Format: "text", Keys: keylog.Hash},
		Kafka: Kafka{
			Brokers:           []string{"127.0.0.1:9092"},
			ClientID:          "keyheat",
			CreateTopics:      true,
			Partitions:        8,
			ReplicationFactor: -1,
			Topics: Topics{
				Events:      "keyheat.events",
				DLQ:         "keyheat.events.dlq",
				Hotkeys:     "keyheat.hotkeys",
				Windows:     "keyheat.windows",
				Progress:    "keyheat.progress",
				Reports:     "keyheat.reports",
				ClientStats: "keyheat.client-stats",
			},
		},
		Events: Events{Codec: schemas.Binary.Name(), Limits: schemas.DefaultLimits()},
		Ingest: Ingest{
			Parse:    logparse.DefaultConfig(),
			Lines:    ingest.DefaultLineOptions(),
			Producer: ingest.DefaultProducerOptions(),
			Delivery: ingest.DefaultDeliveryOptions(),
			Tail:     ingest.DefaultTailOptions(),
			Topic:    ingest.DefaultTopicOptions(),
		},
		Detect:     detect.DefaultOptions(),
		Pipeline:   pipeline.DefaultOptions(),
		Merge:      pipeline.DefaultMergerOptions(),
		ClickHouse: ClickHouse{Options: clickhouse.DefaultOptions()},
		Archive:    archive.DefaultOptions(),
		API:        controlplane.DefaultOptions(),
	}
}
