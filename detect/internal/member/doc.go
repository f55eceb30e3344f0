// Package member is what a detect stage (the events group's partition
// workers, the merge group's merger) does as a member of a Kafka consumer
// group, written once for both:
//
//   - GroupConfig.Opts: a member that commits only by hand, reads
//     committed records only, and whose rebalance callbacks wait for its
//     poll loop (kgo.BlockRebalanceOnPoll), dispatched to a Handler; the
//     group's own offset fetch is read into each partition's commit and
//     metadata (Commits) before any of its records is fetched. A static
//     member fenced out by another with its instance id never rejoins:
//     its owner hears of it at once (GroupConfig.OnFenced), and the
//     client waits to be closed.
//   - Turn: one poll and what the stage does with it, then
//     AllowRebalance, always: commits made in between are in the
//     generation that owns their partitions.
//   - Committer: commits each partition with its own metadata, never
//     moving a commit back, and remembers what it committed.
//   - Release: how partitions are given up: revoked, they stop, drain
//     their outputs until a deadline and are committed; lost, they are
//     never committed (another member may own them already).
//   - Pauses: which partitions' fetching is paused, and why (Behind: what
//     they feed has no room; AtEnd: a batch run read them to its end);
//     a partition resumes once no reason is left.
//
// What may be committed is not its business: a stage computes each
// partition's point from its core and its outputs' acknowledgements
// (package ledger).
package member
