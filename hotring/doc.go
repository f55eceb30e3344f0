// Package hotring tracks how often keys are accessed and reports the hot
// ones, exactly, in bounded memory. It is keyheat's per-partition exact
// tracker: the pipeline admits keys whose Count-Min estimate passed a gate
// and asks the ring for their exact sliding-window counts.
//
// # What it owns, what it does not
//
// It owns counting (lifetime, weighted, sliding-window), throttling
// (TouchAndClamp), ranking (TopN, KeysAbove), and bounding its own memory
// (node cap, sampling, cold eviction, dual-generation rotation). It does not
// estimate keys it does not track (that is package sketch), know about
// Kafka, events, rules or partitions, export metrics or log, or start
// goroutines. Of keyheat it imports only internal/faststr (the inlined
// key comparisons it shares with sketch and pipeline).
//
// # Structure
//
// The design follows the HotRing paper (Chen et al., "HotRing: A
// Hotspot-Aware In-Memory Key-Value Store", USENIX FAST 2020) in its
// ordered, lock-free bucket lists, and NoKV's open-source hotring package
// (github.com/feichai0017/NoKV) in what it counts: windows, rotation, cap
// and sampling. It does not shift bucket heads toward hot items as the
// paper does; chains are kept short by sizing the table instead.
//
// A ring has 2^Bits buckets, by default sized from the node cap so chains
// stay about two nodes long (a fixed 2^12-bucket table would make a full
// ring of 250,000 nodes walk chains about 61 nodes long). A key's 64-bit
// xxh3 hash picks the bucket (low bits); each bucket is a lock-free singly
// linked list sorted by (hash, key), so a lookup stops early. Readers never
// lock. New nodes are spliced in with a CAS on the bucket head or the
// predecessor's next pointer.
// Lifetime counts are atomic; a node's sliding window is guarded by a tiny
// per-node spin lock, never a ring-wide mutex. Removal marks a node dead
// and then unlinks it behind a marker node; table.go walks through why
// that is safe against concurrent inserts, touches and walks.
//
// # Time
//
// The ring never reads the clock. Every method whose answer depends on
// time takes nowMs, milliseconds since the Unix epoch: normally the
// event's own timestamp, the same number the pipeline gives the sketches. Feeding event times makes a replay of an archive give
// exactly the answers of the live run; a caller on wall-clock time passes
// time.Now().UnixMilli(). Without a window, rotation, decay or sweeps,
// nowMs is ignored. Durations in Options must be whole milliseconds.
//
// Rotation, decay and sweeps run inline in the first call whose nowMs
// reaches their deadline (at instants aligned to multiples of their
// interval), never in the background. Late events are counted in their own
// slot if it is still inside the key's window.
//
// # Counts and generations
//
// Without a window a key's count is its lifetime count, optionally decayed
// (count >>= DecayShift every DecayInterval). With a window of WindowSlots
// × WindowSlotDuration, reads report the touches inside the window ending
// at nowMs; Validate rejects decay combined with a window, since the window
// already forgets old traffic. With RotationInterval set, an active
// generation takes touches and a warm one keeps the previous generation.
// TopN and KeysAbove sum a key's counts over both. Frequency and
// TouchAndClamp take the maximum of lifetime counts (as NoKV's hotring
// does) but the sum of window counts: every touch is in exactly one
// generation and the window drops old ones, so the sum is exact, whereas
// the maximum would under-count a key whose window straddles a rotation.
//
// Counts, weights and sums saturate at 2^63-1 rather than wrap.
//
// # Memory bound
//
// Each generation holds at most NodeCap nodes, plus keys admitted past the
// cap (Admit, InsertHash, Options.Admit, and with SampleBits > 0 about
// 1/2^SampleBits of the new keys seen once full). With rotation two
// generations live at once, so the bound is about 2 × NodeCap nodes: halve
// NodeCap for a fixed budget. A node is 64 bytes on 64-bit platforms, plus
// 8 bytes per window counter (WindowSlots × Lanes, plus Lanes running
// totals when Lanes > 1) rounded up to 4, 8, 16, … 512 counters (128 bytes
// with the default 8 slots and one lane), plus the key's bytes, plus 8
// bytes per bucket. A strict cap alone would lock out a key that turns hot
// after the ring filled; Admit and cold eviction (EvictCold, SweepCold,
// Options.ColdSweepInterval) are the remedy. An automatic sweep walks
// every node inline in the one call that reaches its deadline; a caller
// that cannot afford that pause turns it off and calls SweepCold a few
// buckets at a time.
//
// # Hashed entry points
//
// TouchHash, WindowHash and InsertHash serve a caller that counts one key
// in several structures per event (the pipeline's detector): the caller
// hashes the key once and passes the hash; the key is given as a namespace
// and a key (an app and an access key) compared in two parts, so nothing is
// concatenated per call; a touch adds one weight per lane (events, bytes,
// reads, writes…) and returns the key's window, every lane's total and its
// oldest slot, in the same call. InsertHash starts a key with a credit per
// slot, so a key admitted late can start from what a sketch bounds it had.
// SetTagHash keeps a word of the caller's with the key, which every window
// reports (Window.Tag), so a caller can skip a lookup of its own per touch;
// MayTrackHash, one bucket read, lets it skip the call for most keys that
// are not tracked.
// For them a cold key (lane 0 empty over the window) reads as untracked,
// so their answers do not depend on when sweeps run. ns+key is the key's
// identity: a caller whose namespaces could run into its keys ("ab"+"c"
// and "a"+"bc") makes ns self-delimiting, e.g. with a length prefix. A
// caller that owns its ring from one goroutine sets Options.SingleWriter:
// the hashed methods then take no node lock and do no atomic
// read-modify-write, which were most of their cost. When a full ring must
// make room for a heavier key, EvictLowest removes the lightest tracked
// one (Space-Saving's rule). Both that and a whole SweepCold walk the ring;
// a SingleWriter ring that does not rotate remembers what a walk found
// for the rest of its window slot (the least-counting nodes in a lazy
// heap; that nothing is cold), so that calls made key after key walk once
// a slot, with the same answers.
//
// # Keys
//
// Keys are strings, and a node keeps the caller's string as its key
// without copying it, which is what makes an insert a single allocation.
// Ordinary Go strings are immutable, so this is safe; a string that aliases
// a reused buffer (made with unsafe.String) must not be passed: copy it
// first (strings.Clone). A tracked key also keeps alive whatever memory
// its string shares, e.g. the other string fields of the event it was
// decoded with.
//
// # Determinism
//
// Given the same sequence of calls and times from one goroutine, a ring
// returns the same answers: hashing is unseeded, schedules are aligned,
// and TopN and KeysAbove break count ties by key.
package hotring
