// Package ingest moves access-log lines onto Kafka as keyed AccessEvents,
// and nothing is lost on the way.
//
// A source (Tailer for files, ReadLines for standard input, Topic for a
// raw log topic, Gen for synthetic traffic) hands lines to a LineSender,
// which parses them with a logparse.Parser, checks them against
// schemas.Limits and passes them to the Producer: good events to the
// events topic keyed by access key, bad lines as schemas.DeadLetters to
// the DLQ topic. Every record carries a deterministic identity, the
// schemas.RecordID in its keyheat-id header (source and position), so a
// consumer can drop the duplicates an at-least-once restart may send. A
// tail restart reads back what the last run sent past its saved positions
// and skips those lines (readback.go), within ingest.readback_max_records;
// beyond that cap it sends them again, with the same ids.
//
// Sources learn of each record's fate through an Acker and advance their
// saved position (state file, committed offset) only over the contiguous
// run of acknowledged lines (internal/ackseq): a position never passes a
// line Kafka has not acknowledged.
//
// Each component's settings are an options type with its defaults and
// checks (ProducerOptions, LineOptions, TailOptions, TopicOptions); the
// config package maps a file, the environment and flags onto them. What a
// component runs with (clients, loggers, codecs) sits beside the options
// in its XxxConfig.
//
// ingest owns sources, producing and their metrics. Parsing belongs to
// logparse, the wire formats and record ids to schemas, config files to
// config, flags and wiring to cmd/ingest.
package ingest
