// Package hotkeys is what an application imports to act on the hot keys
// keyheat finds, with Kafka as the only coordination between the
// application's processes and keyheat's detect instances.
//
// It owns the application side of the registry topic (keyheat.hotkeys):
// following it into an in-memory set that answers IsHot without locks or
// allocation, and the mitigations an entry asks for: a small in-process
// cache for hot keys only, coalescing of concurrent misses, and splitting
// of hot write keys over several physical keys. It also reports accesses
// for applications that have no access log of their own, and publishes
// the process's own counters (StatsPublisher: local hits, coalesced
// loads, split shards, per busy key) to keyheat.client-stats, where the
// operator API sums them over the processes that report a key.
//
// Its log lines name a key by its key_hash (Entry.KeyHash in hex), as
// keyheat's own do, unless the application sets LogRawKeys in the
// component's config (CacheConfig, SplitConfig); then the key itself
// shows beside it.
//
// It does not detect anything (package pipeline and detect do), and it
// imports nothing of keyheat's but package schemas, whose record shapes it
// shares with detect, internal/redisslot, the Redis Cluster slot function
// detect's skew report uses too, and internal/keylog, the policy for keys
// in log lines.
package hotkeys
