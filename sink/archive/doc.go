// Package archive is keyheat's archive: raw events, window reports and
// hot-key events as zstd-compressed Parquet files in a Hive-style folder
// tree, written so that a crash never leaves a half file visible and a
// restart never archives an event twice, and read back in event-time
// order so a replay runs the live detection code on what was archived.
//
// It owns the archive's layout, its writers (Archive, PartitionWriter,
// ReportWriter and HotKeyWriter, the two RecordWriters) and readers (EventReader, ReadReports,
// ReadHotKeys). The row types are schemas.EventRow, ReportRow and
// HotKeyRow. It does not consume Kafka or commit offsets: detect does, and
// asks PartitionWriter.Durable how far it may commit.
//
// # Layout
//
//	ROOT/
//	  kind=events/app=<app>/dt=YYYY-MM-DD/hour=HH/<topic>_<partition>_<first>_<last>.parquet
//	  kind=reports/app=<app>/dt=YYYY-MM-DD/hour=HH/<source>_<firstMs>_<lastMs>_<hash>.parquet
//	  kind=hotkeys/app=<app>/dt=YYYY-MM-DD/hour=HH/<source>_<firstMs>_<lastMs>_<hash>.parquet
//	  _keyheat/events/<topic>/<partition>/segments/<first>_<last>.json   segment manifests
//	  _keyheat/events/<topic>/<partition>/tmp/                          staging
//	  _keyheat/<kind>/<source>/tmp/                                      staging
//
// dt and hour are the UTC day and hour of the row's event time (the
// event's time, a report's window start, a hot key's onset), never the
// time it was written. App and topic are escaped as Hive escapes partition
// values (bytes outside [A-Za-z0-9._-] become %XX; the empty app is
// __HIVE_DEFAULT_PARTITION__, which DuckDB and Spark read as NULL; long
// values are cut and suffixed with a hash). Offsets in names are
// zero-padded to 19 digits so names sort by offset. Every file carries
// keyheat.kind and keyheat.version in its key/value metadata, events files
// also their topic, partition and offset range.
//
// An events row is one event, identified by topic, partition, offset and
// event_index, its index among the events its record gave: a raw log
// line naming several keys (a Redis MGET, DEL or MSET) is one Kafka record
// and several rows, all of them archived. Inside an events file rows are
// sorted by event time, then offset, then event_index (declared as the
// row groups' sorting columns), in row groups of at most
// Options.RowGroupRows rows. Readers outside keyheat need nothing but the
// tree: DuckDB's read_parquet('ROOT/kind=events/**/*.parquet',
// hive_partitioning = true) or pyarrow.dataset with partitioning "hive"
// (tools_test.go checks both; scripts/pydeps.sh installs them).
//
// # Segments
//
// A PartitionWriter cuts its partition into segments: consecutive offset
// ranges [first, last]. A segment's events are buffered in memory, per
// bucket (app and UTC hour), until the segment rolls: when its buffered
// size reaches Options.SegmentBytes, when it is Options.SegmentAge old, on
// Flush and on Close. A roll makes the whole segment durable at once:
//
//  1. each bucket is sorted and encoded into a staging file, fsynced;
//  2. the segment's manifest (range, file paths, rows, sizes) is written
//     to staging, fsynced, renamed into segments/, and that folder fsynced;
//  3. each staging file is renamed to its place in the tree, and every
//     folder that received one is fsynced (new folders' parents too);
//  4. Durable moves to last+1.
//
// All files of a segment carry the segment's range in their name, not the
// range of their own rows, so a segment's files are known from its
// manifest alone and a re-write of the segment produces the same names.
//
// # Why a restart writes no event twice
//
// detect hands a partition's records over in offset order, each record's
// events in one Append, and commits an offset C only if C <= Durable (and
// its own windows allow it). Segments are cut between records, never
// inside one, so Durable is per offset: a record is durable when all its
// events are. After a
// crash it reopens the partition at the last committed C and hands over
// everything from C again. The claim is: every event ends up in exactly one
// visible file, and files written again are byte-identical (given the same zstd level and
// row-group size; with others, the same names holding the same rows).
//
// Durable only ever equals last+1 of a segment that completed step 3, or a
// position with nothing buffered. Hence at the restart every recorded
// segment falls in one of three cases:
//
//   - It ends before C: nothing of it is handed over again.
//   - It contains C with first < C: Durable passed first, so the segment
//     completed step 3 and all its files are durable. The writer checks
//     this (every manifest file present with its size; if not, Partition
//     fails with IncompleteSegmentError naming first) and skips the events
//     up to last instead of writing them: they are in a durable file.
//   - It starts at or after C: the writer reaches it from its start. If
//     its files are all present, its events are skipped as above. If not,
//     the crash came between steps 2 and 3: the writer re-writes it, and
//     ends it exactly at the recorded last whatever the size or age limits
//     say; Flush and Close leave such a re-write unfinished rather than
//     end it early. Kafka hands over the same records for the same
//     offsets, a record parses into the same events in the same order,
//     the buckets are sorted by (time, offset, index), and the encoder is
//     deterministic, so each file comes out byte-identical and its rename
//     replaces a file by the same file.
//
// Events in no recorded segment are in no visible file: a crash before
// step 2 leaves only staging files, which Partition deletes. A new segment
// starts where the previous one ended (or at C) and is cut off before the
// next recorded segment, so it never overlaps one. A partition whose
// events of several apps and hours are spread over several files is no
// special case: the files of a segment are recorded together and rolled
// together, so there is no offset that one bucket has made durable and
// another has not.
//
// What the argument assumes: one writer per partition at a time (Kafka's
// group assignment; a writer that lost its partition without noticing
// could still publish, which the layout does not fence); offsets
// committed only below Durable; manifests kept as long as their files, so
// expire both together; and input that does not change under an offset
// (true of Kafka, unless retention deleted it: a re-write that finds
// different files than recorded logs an error and records the new set).
//
// # Reports and hot-key events
//
// They are few and have deterministic IDs, so their writers skip the
// segment machinery: rows are buffered per bucket and each bucket becomes
// one file per roll (Options.RecordRows, Options.SegmentAge, Flush,
// Close), staged, fsynced and renamed as above. The file name holds a hash
// of the rows' IDs: re-emitting the same rows writes the same name and
// content; different rows get a different name. A row can therefore be in
// two files only when a restart re-emitted it into a batch cut
// differently; ReadReports and ReadHotKeys return each ID once, and SQL
// readers deduplicate by the id column.
//
// # Reading
//
// EventReader merges every selected file in (time, topic, partition,
// offset, event_index) order, opening a file only when the merge reaches
// its first event time. It decodes columns page by page instead of through
// parquet-go's row reader (see eventFile). A file that is not Parquet, is
// truncated, lacks keyheat's metadata or columns, or fails to decode is a
// *BadFileError naming the file; with Query.SkipBadFiles the reader logs
// it, lists it in Skipped and goes on. Before parquet-go sees a file or a
// row group, the reader checks the footer length, the codecs and every
// page header's sizes against the file, because parquet-go allocates what
// a corrupt header claims; and it recovers the panics parquet-go raises on
// corrupt pages. FuzzEventFile holds it to that.
//
// Readers take every layout version up to schemas.ParquetVersion.
// Version 1, before event_index, archived only the first event of each
// record; its rows read back with event_index 0, and a replay of them
// counts fewer events than the live run did wherever a record gave
// several. A version-1 segment left half-published and re-written by a
// version-2 writer gets every event of its records, so its row counts
// differ from its manifest: the writer logs that as changed input and
// records the new files. Versions 1 and 2, before the hot-key rows' error
// and partitions columns, read back with error 0 and no partitions;
// versions 1 to 3, before their peak_rate column (and the "update" rows
// that came with it), with peak_rate 0. A file missing a column its
// version has is refused. SQL tools reading files of
// several versions together must union their schemas by name (DuckDB's
// union_by_name = true) and see a column an older file lacks as NULL.
//
// # Storage
//
// The writers use the small FS interface (create, fsync, rename, fsync a
// folder, list, stat, open); DirFS implements it on a local folder, and
// FS's documentation says how an object store would.
package archive
