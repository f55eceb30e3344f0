package main

import "slices"

// The config keys (or whole sections) each command reads, for its --help:
// a key a command leaves alone is still accepted (one file serves every
// command) but not offered in its help. A test holds each list to the
// flags its help shows.
var (
	// common are read by every source: the producer and the wait for
	// Kafka at a stop.
	common = []string{"log", "metrics", "kafka", "events.codec", "ingest.compression", "ingest.linger", "ingest.max_buffered_records",
		"ingest.stop_timeout"}
	// parsing are the keys of turning lines into events, read by every
	// source of lines (not gen).
	parsing = []string{"events.max_key_bytes", "events.max_skew", "events.allow_binary_keys", "ingest.format", "ingest.app",
		"ingest.json", "ingest.combined", "ingest.regex", "ingest.max_line_bytes", "ingest.dlq_max_raw"}

	tailReads = slices.Concat(common, parsing, []string{"ingest.tail_id", "ingest.positions_topic", "ingest.rotated", "ingest.rotated_idle",
		"ingest.poll_interval", "ingest.commit_interval"})
	stdinReads = slices.Concat(common, parsing, []string{"ingest.end_timeout", "ingest.spill_file"})
	topicReads = slices.Concat(common, parsing, []string{"ingest.topic"})
	// gen makes events, not lines; ingest.app names their app.
	genReads = slices.Concat(common, []string{"ingest.app"})
)
