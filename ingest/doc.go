// Package ingest moves access-log lines onto Kafka as keyed AccessEvents,
// and says exactly what it could not deliver.
//
// A source (Tailer for files, ReadLines for standard input, Topic for a
// raw log topic, Gen for synthetic traffic) hands lines to a LineSender,
// which parses them with a logparse.Parser, checks them against
// schemas.Limits and passes them to the Producer: good events to the
// events topic keyed by access key, bad lines as schemas.DeadLetters to
// the DLQ topic. Every record carries its schemas.RecordID in the
// keyheat-id header: where its line came from and, for a line that became
// several records, which one it is; ids are unique per record and the
// same each time a line is sent.
//
// What each source guarantees:
//
//   - Tailer: exactly once, for readers with read_committed isolation.
//     The lines read between two commits and the files' positions after
//     them are written in one Kafka transaction, the positions to a
//     compacted topic (positions.go), so a crash at any moment leaves
//     committed exactly the lines the committed positions account for,
//     and the restart resumes there. A reader with read_uncommitted
//     isolation also sees the records of aborted transactions, which are
//     sent again: it gets duplicates (same keyheat-id). Rotation is
//     followed by file identity (device, inode and a fingerprint of the
//     first KiB): a rotated file stays open and is read until it has not
//     grown for TailOptions.RotatedIdle while the new file has data; only
//     a line ended by a newline is a line, an unterminated rest is sent
//     when its file is closed for good. Rotated files are looked for by
//     TailOptions.Rotated patterns (by default only the names logrotate
//     gives: RotatedSuffix), so files that went by while ingest
//     was down, or between two looks, are read too, in order, and a
//     copytruncate copy is read from where the original was left. What
//     ingest sees it cannot read is said, not lost silently: a rotated
//     file deleted before ingest read it (with its unread bytes), a
//     compressed rotated file, a file truncated in place with no copy
//     among the rotated names; a file taken in by its name whose first
//     lines mostly go to the DLQ is said, once, not to look like a log
//     of the path. Two cases are inherent limits that no
//     reader of the files can see: lines written between copytruncate's
//     copy and its truncation are in neither file (logrotate's own race),
//     and a file truncated in place with no copy, whose last lines were in
//     a transaction that Kafka then aborted, cannot be read again.
//   - ReadLines (stdin): when it stops (end of input, a signal), every
//     line read is delivered or written to the spill file, whose path is
//     logged, and ReadLines fails when any was not delivered; a spill
//     file that cannot be written is an error before anything is read. A
//     pipe cannot be read twice, so each line is kept in memory until
//     Kafka took all its records; an unreachable Kafka is waited for
//     (DeliveryOptions bound the wait at the end). A record in flight
//     when ReadLines gives up may have reached Kafka unconfirmed, and a
//     line Kafka took in part (some of its keys) is spilled whole: those
//     few are sent twice by a replay of the spill file. Ids are unique per
//     run (the run's start is part of them). A process that dies without
//     stopping (kill -9, out of memory, power loss) loses the lines it
//     held: at most those Kafka had not acknowledged, bounded by
//     ProducerOptions.MaxBufferedRecords.
//   - Topic: at least once. Offsets are committed only up to the records
//     whose events Kafka acknowledged; a crash re-sends what was read
//     after the last commit, with the same keyheat-ids, for consumers to
//     drop.
//   - Gen: the counts it reports are the events on Kafka. Events Kafka
//     did not take at a stop are not sent again (a run with the same seed
//     repeats the same ids).
//
// Every source stops with an *UndeliveredError (and counts
// Stats.Undelivered) when lines it read are not on Kafka, saying what
// becomes of them; KafkaHealth says in plain lines when Kafka stops and
// starts answering.
//
// Each component's settings are an options type with its defaults and
// checks (ProducerOptions, LineOptions, DeliveryOptions, TailOptions,
// TopicOptions); the config package maps a file, the environment and
// flags onto them. What a component runs with (clients, loggers, codecs)
// sits beside the options in its XxxConfig.
//
// ingest owns sources, producing and their metrics. Parsing belongs to
// logparse, the wire formats and record ids to schemas, config files to
// config, flags and wiring to cmd/ingest.
package ingest
