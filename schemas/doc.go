// Package schemas owns the shapes that cross a process boundary: the
// AccessEvent that ingest writes to keyheat.events, the dead-letter record
// that carries a line ingest could not use, and their wire codecs (JSON by
// default, a compact binary codec for throughput).
//
// Where things are:
//
//   - event.go: AccessEvent.
//   - validate.go: Limits.Validate and the rejection Reasons that
//     InvalidEventError and DeadLetter carry.
//   - codec.go: the Codec interface, the JSON and Binary values,
//     CodecByName for config, Detect and DecodeAny for consumers that accept
//     both formats.
//   - json.go, jsonscan.go: the JSON format (field names and rules are
//     documented on AppendJSON and DecodeJSON), read with keyheat's one JSON
//     scanner, internal/jsonscan, which logparse shares.
//   - binary.go: the binary format (layout documented on AppendBinary),
//     which starts with the magic byte 0xC1 that no JSON can start with, and
//     which alone carries keys that are not UTF-8.
//   - deadletter.go: DeadLetter, the value of keyheat.events.dlq records.
//   - window.go, window_binary.go, report.go, hotkey.go: the partitions'
//     window summaries (binary on the windows topic, JSON also read), the
//     merged WindowReport and the HotKeyEvent (JSON).
//   - manual.go: ManualEntry, an operator's promote or demote of a key on
//     the registry topic (record key "m:" + HotKeyRecordKey), which wins
//     over the detector's records for the key until its TTL ends.
//   - clientstats.go: ClientStats, an application's client-side counters
//     (local cache, coalescing, splitting, per busy key) that
//     hotkeys.StatsPublisher writes to keyheat.client-stats, keyed by
//     client, and the operator API sums per key.
//   - rawkey.go: how the JSON messages carry a key that is not UTF-8
//     losslessly: its bytes in base64 in "key_b64" beside "key" (and
//     "id_b64" beside a hot-key event's "id"), which the decoders prefer.
//
// Decoding is on the hot path of every detect worker, so the decoders cost
// one allocation per event: all string fields of a decoded event share one
// backing array that does not alias the input. DecodeAnyShared saves that
// one for binary events, whose strings then point into the input: for a
// consumer that copies what it keeps (detect without an archive; the
// pipeline keeps no event string). Decoding checks the format
// only; whether an event is acceptable (key present, not too long, time
// near now) is Limits.Validate's job, so a record that decodes but is
// invalid still reaches the dead-letter topic with a precise reason.
//
// It also owns the window and report types, the ClickHouse DDL and queries
// (schemas/clickhouse) and the Parquet row types, so that every on-disk or
// on-wire format lives in one obvious place. It does not own transport
// (Kafka clients, files) or parsing of access-log formats. Of keyheat it
// imports only internal/jsonscan, the one JSON scanner it shares with
// logparse, so every other package can depend on it.
package schemas
