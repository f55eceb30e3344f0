package main

import "slices"

// The config keys (or whole sections) each command reads, for its --help:
// a key a command leaves alone is still accepted (one file serves every
// command) but not offered in its help. A test holds each list to the
// flags its help shows.
var (
	// chConn are the keys that reach ClickHouse.
	chConn = []string{"clickhouse.addr", "clickhouse.database", "clickhouse.user", "clickhouse.password", "clickhouse.password_file",
		"clickhouse.dial_timeout", "clickhouse.tls"}
	// chWrite are the keys of the ClickHouse writer, besides chConn.
	chWrite = []string{"clickhouse.batch_rows", "clickhouse.flush_interval", "clickhouse.max_buffered_rows", "clickhouse.insert_timeout",
		"clickhouse.retry_min", "clickhouse.retry_max", "clickhouse.retention_days"}
	// kafkaConn are the keys that reach the brokers.
	kafkaConn = []string{"kafka.brokers", "kafka.client_id", "kafka.sasl", "kafka.tls"}

	runReads = []string{"log", "metrics", "kafka", "events.max_key_bytes", "events.max_skew", "events.allow_binary_keys",
		"detect", "pipeline", "merge", "clickhouse", "archive", "api"}
	// The demo is a run against its embedded broker (kafka.brokers is
	// its own) that also generates events (events.codec).
	demoReads = []string{"log", "metrics", "kafka.client_id", "kafka.topics", "kafka.create_topics", "kafka.partitions",
		"kafka.replication_factor", "kafka.sasl", "kafka.tls", "events", "detect", "pipeline", "merge", "clickhouse", "archive", "api"}
	// Replay runs the archive through pipeline and merge; it writes to
	// ClickHouse (--clickhouse), a Parquet folder in the archive's
	// layout (--out-parquet) or a topic (--to-topic, events.codec).
	replayReads = slices.Concat([]string{"log", "archive", "pipeline", "merge", "detect.keyed", "detect.flush_timeout", "events.codec",
		"kafka.create_topics", "kafka.partitions", "kafka.replication_factor"}, kafkaConn, chConn, chWrite)
	queryReads = chConn
)
