// Package schemas owns the shapes that cross a process boundary: the
// AccessEvent that ingest writes to keyheat.events, the dead-letter record
// that carries a line ingest could not use, and their wire codecs (JSON by
// default, a compact binary codec for throughput).
//
// Later it also owns the window and report types, the ClickHouse DDL and the
// Parquet schemas, so that every on-disk or on-wire format lives in one
// obvious place. It imports nothing else of keyheat's.
package schemas
