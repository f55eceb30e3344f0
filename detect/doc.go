// Package detect is keyheat's running detection service: the Kafka side
// of what package pipeline computes. It owns the consumer groups, one
// goroutine per assigned partition, decoding and dead-lettering, the
// producers of hot keys, window summaries and reports, the commits, the
// merger's election, and the sinks' acknowledgements and backpressure.
// What a partition computes, and how summaries merge, belong to pipeline;
// formats to schemas; the ClickHouse and Parquet writers to sink.
//
// # One partition
//
// A Service is a member of the detect group (Options.Group). Kafka splits
// the events partitions among the members; each assigned partition gets a
// worker goroutine, started in the assignment callback and fed by the
// poll loop, which never waits for it: a worker that falls behind has its
// partition's fetching paused until it catches up, so a slow sink never
// holds up a rebalance (kgo.BlockRebalanceOnPoll gates callbacks on the
// poll loop, not on the workers).
//
// A worker reads its records in offset order. A record is an AccessEvent
// in either codec (schemas.DecodeAny) or, with a log format, a raw log
// line that may give several events (package logparse); every event is
// checked against schemas.Limits: live, its time against the wall clock,
// which closes idle partitions' windows; with ExitAtEnd against when its
// record was produced (schemas.Limits.ValidateProduced: only a time too
// far ahead of it is refused, so a backfill of old events is read as any
// other). A record that does not decode or fails the checks becomes a
// schemas.DeadLetter on the DLQ topic, naming it (schemas.KafkaSource) and
// carrying its keyheat-id, and the partition goes on; the log says every
// few seconds, when more went there, how many did and why, and at the
// end of a run what it read and dead-lettered, warning when that was most
// of it. Events go to the partition's pipeline.Partition, built at the
// first event from the committed offset and metadata, keyed (record key
// equal to the access key) as configured or as that first event shows;
// the first partition of each topic logs the decision at INFO, and one
// that decides otherwise warns, once per topic. Every later record of a
// partition found keyed is checked against its events' keys: under auto
// the first that is not keyed switches the partition's open and later
// windows to not keyed (pipeline.Partition.Unkey), so that the merger
// bounds their keys over every partition; with Keyed true it stops the
// service with a *KeyMismatchError before the record is counted, so no
// commit passes it. Each such record counts in
// keyheat_detect_key_mismatch_total.
// What the core outputs is published at once: hot-key events (hot, the
// updates of a key that stays hot, cooled) to the compacted registry (key
// schemas.HotKeyRecordKey) and the sinks, each cooled followed on the
// registry alone by a tombstone under the same record key so that
// compaction drops the key (registryRecords); window summaries to the
// single-partition windows topic (key schemas.PartitionWindowID). The
// producer is idempotent with acks from all in-sync replicas, so a
// partition's summaries reach the merger in order, and a key's cooled and
// tombstone reach the registry in that order. Detect writes no other
// record key there: a manual entry's ("m:…", another writer's) is never
// touched.
//
// # Alignment
//
// The merger holds a window until every partition reported it, and at
// most merge.max_pending_windows windows with events. A worker therefore
// does not move its partition's clock (its newest event time) on while
// that clock's window lies more than MergerOptions.AlignWindows (half of
// that) windows past the slowest other partition of the group, of any
// events topic and any instance: it waits, its queue fills, and its
// partition's fetching pauses, as Flink's watermark alignment (FLIP-182)
// holds its sources. The rule is on the partition's own position, so the
// slowest partition never waits, whatever its next event, and some
// partition always goes on; one past a gap in event time jumps ahead with
// that event and then waits.
//
// A partition's position, as the others see it, is its clock's window,
// held back to the lateness past its oldest summary Kafka has not
// acknowledged: the others' summaries must not reach the windows topic
// far ahead of its own (a lagging producer on a starved machine, a
// partition just taken over re-sending its windows), or the merger would
// read past its cap before it reads that one.
//
// Positions travel on the progress topic (schemas.Progress, compacted,
// one partition, written and followed by every instance: the board):
// each worker sends its partition's state and clock when its window
// moves (at most every 100 ms) and at least every beat (a tenth of
// detect.partition_timeout, at most a second), while it waits too, and
// each instance sends a member record of its own. The partitions held
// here are compared live, those held elsewhere as the board last heard
// them, so an instance that holds every partition runs at full speed and
// several keep in step within a round trip through Kafka.
//
// A partition with no event yet holds the others back until its first,
// or, live, until it has been idle for the pipeline's idle timeout with
// nothing left to read (records may be on their way to an empty one: a
// backfill started after detect); an ended one (ExitAtEnd), an idle one
// and a silent one hold nothing back. A worker asks the aligner again
// whenever a limit it was given may have fallen (a partition joined or
// took its first event, the board heard news). A live clock further than
// the drift ahead of the wall clock is not held (nothing would catch up
// with it). Waiting changes when events are handled, not what they give:
// the reports stay byte-identical.
//
// The same board tells the merger what it cannot learn from summaries: a
// partition that said nothing for detect.partition_timeout (measured on
// this instance's clock, up to the newest of its own member records read
// back, so a board that falls behind declares nobody silent) is silent,
// and windows are reported without it; a partition that never had an
// event and has been idle for the idle timeout has none in what the other
// partitions passed (its clock is the lowest of theirs, and its core
// starts with it, so its older first events are late there too). The
// board sends every held partition's progress each beat, whatever its
// worker is doing, so a partition held up by a sink or a full producer is
// alive and waited for; only an instance that stopped falls silent. What
// the merger expects comes from the detect group's description: every
// partition of the topics its members are assigned (every five seconds,
// when the group is stable).
//
// # Commits
//
// A worker tells its core which outputs are acknowledged (Acked,
// AckedHotKey) once every destination has them: Kafka (for a cooled, its
// tombstone too), and ClickHouse and the archive when they are on. The core's CommitPoint is then the offset
// to commit and its metadata (schemas.CommitMeta); the worker lowers the
// offset to its oldest dead letter not yet acknowledged and to the
// archive's durable offset, and publishes the result. The poll loop
// commits the published points every CommitInterval, between a poll and
// AllowRebalance, with each partition's metadata set on the group's own
// commit request (kgo.PreCommitFnContext): every partition committed is
// still ours, in the generation the commit carries. The metadata is read
// back from the group's own offset fetch at assignment
// (kgo.OnOffsetsFetched), so a restarted or new owner resumes exactly
// where the commit says; metadata it cannot use (another consumer's, or
// another window length's) is logged and dropped, and the windows open at
// the commit are then emitted again from partial counts.
//
// Nothing is committed that is not acknowledged, and the last polled
// offset is never committed as such: an offset moves only when the core,
// the dead letters and the archive all allow it. A revoked partition
// stops, waits up to FlushTimeout for its outputs in flight, makes its
// archive durable and commits before it is let go; a lost partition is
// dropped without a commit (another member may already own it). A stop
// (Run's context ending) leaves the group, which revokes every partition
// that way. An output refused for good stops the service with an error:
// its offset can never be committed, so a restart must re-read from the
// commit. A restart re-emits what was not acknowledged under the same IDs
// (pipeline's restart guarantee), and every consumer and sink dedupes by
// them; this is at-least-once delivery that is exactly-once in effect.
//
// Both stages are built from one runtime kit: package
// detect/internal/member holds the group membership (consumer options,
// the offset fetch read at an assignment, the poll turn, the commits with
// metadata that never move back, the revoke and lost rules), and
// detect/internal/ledger the outputs in flight and their
// acknowledgements, which decide how far a partition may commit.
//
// # The merger
//
// Every Service with a Merge configuration is also a member of the merge
// group (Options.MergeGroup) on the windows topic. That topic has one
// partition, so Kafka gives it to exactly one member: the merger. It
// feeds the summaries to a pipeline.Merger, publishes the merged reports
// to the reports topic, ClickHouse and the archive, and commits the
// windows topic where the merger allows, with the end of its acknowledged
// reports as metadata ("khm1 done=<ms>") so the next merger does not
// report those windows again. When ClickHouse has no room (its buffer is
// full while it is slow or down), the merger's reports wait in order,
// fetching pauses and commits stay where the unacknowledged windows hold
// them; the loop keeps polling, so the merger stays in its group.
//
// # Cluster alerts
//
// On an events topic not keyed by access key a partition's core hands
// out candidate batches instead of hot-key events (see pipeline); the
// worker produces them to the windows topic beside the summaries, record
// key schemas.CandidatesID (it starts "cand:", which no summary's
// PartitionWindowID can: topic names have no ':'). The merger feeds them
// to a pipeline.ClusterAlerts, not to the summaries' Merger, so they never
// hold its commit point, and publishes the cluster's hot, update and
// cooled events (and a cooled's tombstone) to the registry
// (schemas.HotKeyRecordKey), ClickHouse and, when
// it is on, the Parquet archive's hot keys (writer source "cluster",
// flushed before the commit passes the batch behind the event). Its
// commit goes no further than the first batch of the round two longest
// rule windows, the cool-down and the suppression before the last round
// evaluated, nor than two
// longest rule windows before the round that raised a key still hot (or
// cooled less than the suppression and two longest rule windows ago:
// until then the first bound may still fall inside its episode), nor past the batch behind a
// cluster event not acknowledged: a new merger re-reads them, rebuilds
// the rounds and re-emits the events with the same IDs, which the
// registry, ClickHouse and the archive's reader dedupe (meanwhile the
// registry's last record for a cooled key may briefly be its hot again,
// until the re-emitted cooled and tombstone follow). The commit's metadata names that
// round: every batch of it and later rounds lies after the commit, but a
// lagging partition's batches of earlier rounds do too, and sums of
// those alone could raise a key anew, so a new merger decides no round
// before it (ClusterAlerts.SetStart). A key that stays hot holds the
// commit at its onset, so the windows topic's retention must outlast the
// longest hot episode. Replay
// runs the same cluster stage over the archived partitions' batches.
//
// # Modes and operation
//
// With ExitAtEnd a run reads each assigned partition up to the end offset
// (last stable offset) it had when assigned, closes every window
// (pipeline.Partition.End), lets the merger report everything up to the
// windows topic's end, commits and returns: a batch run whose output
// depends only on its input (the wall clock advances nothing). A batch
// whose records gave no event while some went to the DLQ returns a
// *NothingDetectedError, so the command exits non-zero. The merger's end
// check (report everything, drain, commit) runs inside a turn of its
// group loop, between a poll and AllowRebalance, like every other commit:
// a rebalance asked for meanwhile waits for it, so the revoke callback
// never drains or drops the merger under it. Live, a
// quiet partition's windows close by the wall clock (Idle) after the
// pipeline's idle timeout.
//
// Reload swaps new rules into every core between two events, counts kept;
// a configuration that changes anything else of the pipeline is refused.
// Ready is what /readyz serves: the group joined, no sink retrying.
// Metrics cover records, events, late events, lag and committed offset
// per partition, dead letters by reason, hot-key events by type (hot,
// update, cooled) and the hot's delay from onset, windows, reports, commits, rule reloads and the pipeline's
// own counters.
//
// `detect demo` runs this service against package internal/demo's
// embedded broker, traffic and terminal view.
package detect
