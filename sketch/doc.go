// Package sketch holds keyheat's bounded-memory, mergeable summaries of a
// stream of access keys: a Count-Min sketch (CountMin), a heavy-hitter
// tracker (TopK) and a distinct-key estimate (Cardinality).
//
// # What it owns and what it does not
//
// It owns the data structures, their error bounds, sizing helpers, and a
// versioned binary encoding for each (MarshalBinary / AppendBinary /
// UnmarshalBinary: magic, version, body, CRC-32C; corrupt input is an
// error wrapping ErrCorrupt, never a panic) so that window summaries can
// travel through Kafka to the merger and into archives. Every encoding is
// version 1, except a Cardinality's of few keys: version 2 lists its
// non-zero registers (hundreds of bytes for a quiet window, not 2^p), and
// decoders read both. Merges of structures
// built differently fail with a *MismatchError (errors.Is
// ErrDimensionMismatch).
//
// It does not own rules, thresholds, watermarks, which window a report
// belongs to, the summary message that bundles the pieces, or any I/O; those
// are pipeline/ and schemas/. Of keyheat it imports only internal/faststr
// (the inlined key comparisons its probes share with hotring and
// pipeline). Time is always supplied by the caller (event time, Unix ms):
// nothing here reads the clock, so a replay computes what the live run
// computed.
//
// No type is safe for concurrent use: the pipeline feeds each structure from
// its partition's single goroutine, which keeps the hot paths lock-free and
// allocation-free.
//
// # Hashing once
//
// Every structure derives a key's positions from one 64-bit xxh3 hash of
// the key (Hash). A caller that counts the same key in several structures
// hashes it once and passes the hash to CountMin.AddHash and EstimateHash,
// TopK.AddHash and Cardinality.AddHash; the results are exactly those of
// the methods that take the key. TopK.AddHash also returns the tracked
// key's entry ID, stable while the key stays tracked, so the caller can
// keep side figures per tracked key (bytes, latency) in a plain array.
//
// # Count-Min sketch
//
// Depth rows × Width uint64 counters in one flat array; the row columns come
// from one 64-bit xxh3 hash per key by double hashing (h1 + i·h2). Estimates
// never fall below the true count. Bounds (Cormode & Muthukrishnan 2005),
// with N the total weight added:
//
//	ε = e / width, δ = e^-depth: P(estimate − true > ε·N) ≤ δ
//	width = ⌈e/ε⌉, depth = ⌈ln(1/δ)⌉           (DimensionsForError)
//	bytes = depth · width · 8                   (CountMinConfig.Bytes, DimensionsForBudget)
//
// The default 4 × 2048 is 64 KiB with ε ≈ 0.133 % and δ ≈ 1.8 %;
// TestCountMinErrorBound checks the δ fraction on a fixed stream. Merge of
// plain sketches gives exactly the counters of one sketch fed both streams;
// conservative update (optional) tightens estimates but then a merge is only
// an upper bound.
//
// # Top-K: filtered Space-Saving
//
// TopK tracks Capacity keys with exact counts since admission in a hash
// table + min-heap (zero allocations except copying a key when it is
// admitted). Untracked keys go into a conservative Count-Min filter; one is
// admitted only when its filter estimate beats the smallest tracked count,
// which it evicts (the evicted key's counted weight returns to the filter).
// Guarantees for every key, deterministic (no probability involved):
//
//	Count − Error ≤ true ≤ Count            (Item, Estimate)
//	untracked key: true ≤ Floor()
//	streaming (no merge): Floor() ≤ N / Capacity
//
// so every key heavier than N/Capacity is tracked, and a tracked key's error
// is at most the bound it was admitted with (≤ Floor at admission, and ≤ its
// filter over-estimate, which the filter's ε, δ bound where N counts only the
// untracked tail). Before the table first fills every count is exact. Merge
// adds both sides' bounds (a side that does not track a key contributes
// [0, min(its filter estimate, its Floor)]) and cuts to Capacity, raising
// Floor to cover what it cut. Memory: filter bytes + Capacity ·
// TopKEntryBytes(keyLen) + TopKTableBytes(Capacity); TopKConfigForBudget
// splits a budget. The default (1024 keys, 4 × 2048 filter) is 144 KiB
// for 22-byte keys.
//
// Why this algorithm. Two classic alternatives were measured on the same
// table, heap and budget (BenchmarkTopKAlgorithms in compare_bench_test.go,
// on the accuracy workloads below): plain Space-Saving (Metwally, Agrawal and
// El Abbadi 2005) and the classic Count-Min + min-heap top-K. At a 1 MiB
// budget all three find every heavy key; at 64 KiB they separate, for
// reasons that follow from the algorithms. Plain Space-Saving admits every
// key, so the tail churns the table: its error grows to N/Capacity and it
// copies a key on most tail events. Count-Min + heap ranks keys by their
// sketch estimate, so a light key whose counters all collide with a heavy
// key's is reported with the heavy key's count. Keeping heavy keys out of
// the filter, as the Augmented Sketch of Roy, Khan and Alonso (2016) does,
// removes exactly those collisions, and a tracked key costs one hash, one
// probe and one heap step without touching a sketch counter. HeavyKeeper
// (Gong et al. 2018) was not built: its decay undercounts by design, so its
// counts are not upper bounds, and it does not merge exactly.
//
// # Accuracy against the goal
//
// The goal is ≥ 99.99 % precision and ≤ 0.1 % count error. TestAccuracyAt1MiB
// (10M events; 1M under -short or -race) checks it at 1 MiB on three fixed
// workloads: Zipf 1.1 over 1M keys, 5M uniform keys + 20 planted at 0.2 %,
// and a 90 % never-repeated flood + 50 hot keys. It fails unless every
// reported key's true count lies within its bounds, every key above 0.1 %
// share is in the top-100, and precision is at least 99 %. Precision is
// measured at k = min(100, keys with share ≥ 0.01 %): below that share a
// workload's "true top-100" is sampling noise among millions of keys with a
// handful of events that no detector can rank or needs to. A reported key
// counts as correct when its true count is at least the true k-th count, so
// ties at the boundary are all correct answers. A few hundred ranked keys
// cannot demonstrate 99.99 %; what is guaranteed is the deterministic bound
// above: a key is missed or misranked only by ≤ Floor ≤ N/Capacity (0.049 %
// of N at 2048 keys), and the error of a top key is 0 whenever it was
// admitted before the table filled or with a small filter estimate.
//
// # Cardinality
//
// Cardinality wraps github.com/axiomhq/hyperloglog, an implementation of
// HyperLogLog (Flajolet, Fusy, Gandouet and Meunier 2007); precision 14 by
// default: 16 KiB dense, standard error 1.04/√2¹⁴ ≈ 0.81 %. It is fed with
// the package's xxh3 hash so all instances agree; merges give the union's
// estimate.
//
// CardinalityUnion is a merger's accumulator of encoded estimates: it
// gives exactly the estimate a sparse Cardinality gives after merging each
// of them decoded, but a dense one (ParseCardinality's CardinalityBlob
// keeps its encoding's bytes) is folded into the union's own registers
// without a decoded copy, and the union estimates with the library's dense
// estimator, copied (cardinality_estimate.go).
//
// # Performance
//
// Measured figures: BENCHMARKS.md (written by `make bench`) and
// docs/benchmarks-history.md. The memory of
// every structure is fixed by its config; TestMemoryDoesNotGrowWithDistinctKeys
// asserts it does not grow with the number of distinct keys.
package sketch
