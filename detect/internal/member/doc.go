// Package member is the part of a detect stage that is a member of a
// Kafka consumer group: it commits the group's partitions, each with its
// own metadata, never moving a commit back, and remembers what it
// committed; and it adapts slog to franz-go's logger.
//
// What may be committed is not its business: a stage computes each
// partition's point from its core and its outputs' acknowledgements
// (package ledger) and hands it to a Committer. Committing in the right
// generation is the caller's part too: between a poll and
// AllowRebalance, or in a revoke callback, with kgo.BlockRebalanceOnPoll;
// never for a lost partition.
package member
