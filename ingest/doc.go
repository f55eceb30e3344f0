// Package ingest moves access-log lines onto Kafka as keyed AccessEvents,
// and nothing is lost on the way.
//
// A source (Tailer for files, Stdin, Topic for a raw log topic, Gen for
// synthetic traffic) hands lines to a Pipeline, which parses them with a
// logparse.Parser, checks them against schemas.Limits and passes them to
// the Producer: good events to the events topic keyed by access key, bad
// lines as schemas.DeadLetters to the DLQ topic. Every record carries a
// deterministic identity in the keyheat-id header (source and position),
// so a consumer can drop the duplicates an at-least-once restart may send.
// The tailer sends none after a crash: a restart reads back what the last
// run sent past its saved positions and skips those lines (readback.go).
//
// Sources learn of each record's fate through an Acker and advance their
// saved position (state file, committed offset) only over the contiguous
// run of acknowledged lines: a position never passes a line Kafka has not
// acknowledged.
//
// ingest owns sources, producing and their metrics. Parsing belongs to
// logparse, the wire formats to schemas, flags and config to cmd/ingest.
package ingest
