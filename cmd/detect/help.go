package main

import (
	"github.com/spf13/cobra"

	"github.com/keyheat/keyheat/cmd/internal/cli"
	"github.com/keyheat/keyheat/config"
)

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
	replayReads = concat([]string{"log", "archive", "pipeline", "merge", "detect.keyed", "detect.flush_timeout", "events.codec",
		"kafka.create_topics", "kafka.partitions", "kafka.replication_factor"}, kafkaConn, chConn, chWrite)
	queryReads = chConn
)

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// setupHelp gives the commands their --help and --help-all (see
// cli.SetupHelp), once root has every command.
func setupHelp(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "run":
			cli.Reads(c, runReads...)
		case "demo":
			cli.Reads(c, demoReads...)
		case "replay":
			cli.Reads(c, replayReads...)
		case "query":
			cli.Reads(c, queryReads...)
		}
	}
	cli.SetupHelp(root, config.CmdDetect)
}
