// Package pipeline is what keyheat computes from a stream of access
// events, independent of where the stream comes from: per partition of the
// events topic, report windows and their summaries, hot-key detection and
// the commit point (Partition); across partitions, the merged reports.
// It does no I/O, reads no clock and starts no goroutine: the live
// service, a replay of an archive and a test feed the same code the same
// events and get the same output. Kafka, producers, commits and metrics
// belong to detect; the formats it emits belong to schemas.
//
// # A partition, event by event
//
// A Partition is fed its partition's events in offset order
// (Process). Each event, its key cut to MaxKeyBytes if longer (prefix, "…"
// and a hash of the whole key, marked Shortened wherever it is reported;
// by default MaxKeyBytes is the longest key ingest accepts), goes through:
//
//  1. the clock: the partition's newest event time; the watermark trails
//     it by Lateness. A new watermark closes the report windows it passed
//     and a new detection slot runs a detection tick;
//  2. the report window of its event time, unless that window is closed
//     (the event is late: counted in the Late of the oldest open window,
//     nowhere else);
//  3. the whitelist (listed keys are never reported, but still count in
//     totals, slots and distinct keys) and the rules: the first rule, in
//     order, whose app and key patterns match watches the key;
//  4. detection, for a watched key, in the group of its rule's window.
//
// The key is hashed once (xxh3, sketch.Hash) and every structure below
// takes that hash. Detection runs before the window counts the event, so
// that the exact table's cache miss, prefetched right after the hash,
// overlaps detection's work.
//
// # Report windows
//
// Windows are tumbling, aligned to multiples of Window since the epoch.
// Windows close in order as the watermark passes them, and each with an
// event or a late event is emitted as a schemas.PartitionWindow; of empty
// windows closing together only the last is, to say how far the
// partition came (a partition that reports a window has nothing more for
// the earlier ones), so a gap in event time costs one summary. A summary
// holds, per app (at most MaxApps, the rest under schemas.OtherApp), exact
// totals of events, bytes, reads, writes and latency; its heaviest keys by
// events (Top, with Floor bounding every key left out) and by bytes,
// reads, writes and latency (Summary.BigKeys each); a HyperLogLog of
// distinct keys; events per Redis Cluster slot (Slot); and, when the
// topic is not keyed by access key, the app's Count-Min sketch. End
// closes every window and marks the last Final.
//
// Keys are counted exactly: each open window has one table (exact.go) of
// every key of every app, with its events, bytes, reads, writes, latency
// and slot, keyed by the event's hash, up to Summary.ExactKeys keys and
// ExactKeyBytes of key bytes. It holds a key from its first event in the
// window or never: the first key it has no room for makes it full for the
// rest of the window, and that key and every new key after it go to their
// app's filtered Space-Saving top-K (sketch.TopK: Count − Error ≤ true ≤
// Count, every untracked key at most its Floor) and big-key tracker, while
// the keys in the table stay exact. An app whose keys went there has its
// lists marked Approximate; its lists merge the table's keys (Error 0,
// every figure exact) with the trackers' (figures are lower bounds where
// Error is above 0), and its Floor is the larger of the top-K's and the
// first count left out. Without overflow Top is the app's exact top with
// exact figures, Floor the first true count left out. Tables are reused
// window after window, clearing only the slots used.
//
// Idle, called with the wall clock, advances a quiet live partition's
// clock to it after IdleTimeout so its windows still close; output it
// causes depends on when it was called.
//
// # Detection
//
// Rules give a sliding window W, cut into Slots slots of d = W/Slots, and
// thresholds in events/s and/or bytes/s over it (events of the rule's ops
// only). Per distinct W the detector keeps:
//
//   - one Count-Min sketch per slot, Slots+1 of them (conservative update),
//     which every counted event goes into. For any key and slot, the
//     slot's estimate bounds from above what the key had in that slot;
//   - a HotRing (package hotring) counting admitted keys exactly, per
//     slot, in five lanes: gate passes, counted events, bytes, reads,
//     writes.
//
// An event passes its key's gate when its slot's estimate reaches Gate ×
// the rule's rate × d. A key whose count over a window reaches the
// threshold has, in some slot, at least Slots/(Slots+1) of its rate × d,
// so with Gate at most that every key that crosses its threshold passes the
// gate before it does. A key that passes and is not tracked is admitted to
// the ring credited, slot by slot, with the sketches' estimates: its count
// never falls below the truth, and is exact once the credited slots have
// left the window. A key that has passed no gate for a whole window reads
// as untracked (the ring's "cold") and is freed by incremental sweeps.
// Admission is bounded (see DetectOptions.RingNodes): past 2 × RingNodes
// keys only a key whose estimate reaches its threshold gets in, in place
// of the tracked key with the smallest count (Space-Saving's rule), so a
// key that turns hot after the ring filled still gets a node while keys
// that merely pass the gate cannot churn it.
//
// This replaces the "current and previous window" Count-Min pair of the
// first design: a pair bounds a key's count over up to two windows, which
// is fine for a gate but cannot say in which slots the key's events fell,
// so crediting a key at admission from it either over-counts by up to a
// window or under-counts. One sketch per slot costs (Slots+1)/2 times the
// memory and the same per event.
//
// A key's count as of now is its events in the window's slots after the
// oldest one, up to now. Each lies in (now − W, now], so the count is a
// lower bound of the key's count over the window, short by at most the
// oldest slot's events (part of that slot is still inside). An alert
// gives both: Count, and Error, the oldest slot's events, so the window
// held at most Count + Error. The oldest slot is not taken pro rata: log
// timestamps of whole seconds put a second's events at a slot's first
// millisecond, where an even spread within the slot is far from the
// truth (it made a key at half its rate look at its rate for ever). A
// watched key is published hot at the first of its events at which that
// count reaches a threshold, with the rate it crossed at: never before
// its true crossing, and, for a key whose rate then stays at
// Slots/(Slots−1) of its threshold or more, no later than one slot after
// it. A key that reaches its threshold over a window only with events of
// that window's oldest slot (one that crosses and falls back within a
// slot, or hovers just at its threshold) can be missed. Credits add to
// the count, so a key can also be published early by what its slots'
// estimates exceed its true counts (at most e/SketchWidth of a slot's
// events per slot, with probability 1 − e^-SketchDepth), and only in the
// window after its admission.
//
// Alert state: a published key stays hot (no second "hot") until its
// count has stayed below its thresholds for CoolDown of event time, then
// is published cooled; checked on its events and at every slot. A key
// that crosses again less than Suppress after cooling is published at
// the end of Suppress if still hot then, never if it cooled meanwhile.
// Hot events advise a local cache for a key read at least as often as
// written, else splitting it into the next power of two of its write rate
// over SplitCapacity.
//
// Refresh: a hot key's crossing rate is about its threshold whatever its
// load, so while it stays hot the detector publishes it again, Type
// "update", when its rate has moved by DetectOptions.RefreshChange (a
// share, ±25 % by default; 0 turns updates off) of the Rate of the
// episode's last record (its hot or its last update). The check runs at
// every slot boundary, on the key's counts over exactly the window ending
// at the boundary (the tick comes before any event of the new slot is
// counted, so nothing is left out or taken pro rata: Error is 0), for a
// key whose count over that window reaches a threshold of its rule (a
// key falling below is left to cool), and at most one record per rule
// window: a rate is measured over a window, and one measured sooner still
// holds the last record's events. A step in load is thus published as
// the window takes it in, and again a window later if the rest of the
// step moves it by the share again; a slow drift when it has drifted by
// the share. An update has the rate, counts and advice of that window
// (so a write-heavy key's split follows its load), PeakRate the highest
// Rate published in the episode, OnsetMs the episode's onset, and an ID
// naming the boundary's event time (schemas.HotKeyID with type "update"):
// its decision and content depend only on the events. Hot carries
// PeakRate = Rate, cooled the episode's PeakRate. Updates only add
// records: hot and cooled come out as without them.
//
// # Cluster-wide rules on topics not keyed by access key
//
// A rule's rate is the key's rate over the whole topic. When the topic is
// not keyed (Source.Keyed false) and has more than one partition, a
// partition publishes no hot-key events: it detects with local
// pre-thresholds (every rate × DetectOptions.PreThreshold / Partitions,
// so that a key at its rate spread evenly is a candidate everywhere) and,
// at every slot boundary its clock passes, hands out a schemas.Candidates
// per rule window (candidates.go): its keys whose count over the Slots
// slots before the boundary reaches the local threshold, with those
// counts (whatever the key's local alert history: a restart rebuilds
// counts, not every past episode), and per rule a floor every unlisted key
// is below (while Stats.RingRefused and AlertsDropped stay 0). Batches
// claim the commit point as hot-key events do (AckedCandidates) and are
// emitted again identically after a restart.
//
// ClusterAlerts (cluster.go) sums them: per (topic, rule window) it
// evaluates a round per slot end once every partition reported it (or is
// more than its hold behind the newest, or silent), lower = the listed
// counts, upper = lower + the floors of the partitions not listing the
// key, and raises hot/cooled with the alert state machine above, on the
// rounds' clock, under IDs with partition schemas.ClusterPartition, and
// updates as a partition does (refresh, above), decided at rounds on the
// listed counts' sum (Rate is the lower bound's, as hot's), with the
// round's slot end as their event time: one stream per key, whatever the
// partitions. A stage fed from before an episode's round (detect's merger
// holds its commit there, EpisodeStartMs) raises its updates again
// exactly.
//
// SetRules replaces rules between events: a window that stays keeps its
// sketches, ring and alert state; a new window starts empty. A key hot
// under a window no rule uses any more is handed over, without a record,
// to a window that holds it hot (the registry keeps one record per app and
// key, so a cooled from the old window would take it off while it is hot),
// and is published cooled otherwise, after the cool-down and not before
// every window in use counted a whole window since the reload. The cluster
// stage keeps its state across SetRules and cools the keys of a rule no
// longer defined.
//
// # Commit point and restarts
//
// Every window and hot-key event handed out claims the commit point until
// detect acknowledges it (Acked, AckedHotKey): a window with the lowest
// offset of an event counted or attributed to it (or, with none, of the
// event whose processing closed it), a hot-key event with the offset of
// the event that caused it. The resume offset C is the lowest claim of
// anything not acknowledged, windows still open included, or the next
// offset. Windows close in order and every event of an open window is at
// an offset ≥ C, so re-reading from C rebuilds them.
//
// What the partition commits is an offset at most C: the latest point at
// least 3 × (longest rule window) + CoolDown + Suppress of event time
// before C. Events from there to C only warm detection up; the metadata
// (schemas.CommitMeta) carries C, the partition's clock before the
// committed offset, and the first window not acknowledged. A partition
// restarted from a commit point (NewPartition with Start{Offset, Metadata})
// guarantees:
//
//   - windows: every window not acknowledged at the commit is emitted again
//     byte for byte as the crashed run emitted (or would have emitted) it;
//     none acknowledged is emitted again;
//   - hot keys: every hot-key event the crashed run published (or would
//     have published) at or after offset C is published again with the
//     same ID and content, and none before C. A key hot before C is known
//     to be hot and is not published hot again; its "cooled" comes with
//     the ID the crashed run would have used.
//   - updates: as hot keys, for every episode whose crossing the re-read
//     span (the warm-up) saw. Of an episode older than that (a key hot
//     for longer than the warm-up at the commit) the restart knows that
//     the key is hot, not what the crashed run published of it: it takes
//     the key's first crossing in its re-read as the episode's hot, so
//     its updates and cooled carry that onset and the peak since, and its
//     updates come where its own last published rate says: where the
//     crashed run's did (same IDs, rates and advice) only while the two
//     runs' last published rates agree. Making them exact needs the
//     episode's onset, peak and last rate across the commit, which the
//     commit metadata does not carry.
//
// These hold because the detector's state depends only on the last 2W +
// CoolDown + Suppress of event time: every event goes into the sketches
// whether its key is tracked or not, whether a key is tracked depends only
// on its gate passes in the last window, and an admitted key's count only
// on its window. They need the same options and rules as the crashed run,
// no Idle call inside the re-read span, and a ring that never refused or
// evicted a key for space there (Stats.RingRefused, RingEvicted). Committing a lower
// offset than the commit point, with its metadata, is safe; a higher one
// is not.
//
// # Merging partitions into reports
//
// The Merger (merger.go, merge_window.go, skew.go, advice.go) turns the
// partitions' PartitionWindows into one cluster WindowReport and one per
// app for each report window with an event. It waits on progress, not on
// the clock: until every expected partition (0..Partitions−1 of every
// configured, announced (Expect) or seen topic; a partition that reported
// a later window, or ended Final before, has nothing more to say) has
// reported the window, however long that takes; until every partition
// still missing is silent (the caller's status: nothing heard of it for
// its partition timeout) or, never having had an event, idle with a clock
// past the window; or until max_pending_windows windows with events are
// held. Then it reports the window once, in window order, Partial with
// the missing partitions named when some never came (logged at WARN).
// Empty summaries only mark their partition's progress: they are not
// held, and a window no partition had an event in is not reported, so a
// jump over a gap in event time costs nothing. A summary for a window
// already reported is a duplicate when the report had its partition (a
// restart sends again what it sent), and otherwise late: counted with its
// events (MergerStats.LateEvents), logged at WARN at most every ten
// seconds, and dropped; a partial report is not reissued. The detect
// service keeps every partition, of every instance, within
// MergerOptions.AlignWindows (half the cap) of the slowest, so that the
// cap is not reached while every partition's instance is alive.
//
// On a topic keyed by access key each key lives on one partition, so a key
// has the figures of the partition that lists it: exact where that
// partition counted it exactly, within its bounds otherwise; a report
// built from summaries none of which is approximate has the exact top-N
// (ties at the cut in any order) and exact first Summary.BigKeys keys of
// every secondary ranking. Otherwise bounds add over partitions, a
// partition that does not list a key contributing at most min(its
// Count-Min estimate, its Floor), as sketch.TopK.Merge does, and every key
// not listed has at most the report's Floor. Of a key listed in several
// lists of one summary the merger takes the tightest count bounds and the
// largest lower bound of each figure. The report says how many of its
// leading keys are guaranteed (their lower bounds at least every other
// key's upper bound and the Floor: Metwally et al.'s guaranteed top-k) and
// whether it is Approximate. The merger works out those bounds only for
// the keys a report can show: a key whose largest possible count is below
// the (TopN+1)-th largest least count, and each of whose figures is below
// that figure's TopN-th largest, is left out, which changes no report.
// For an app of 32,768 listed entries or more with no unkeyed Floors (a
// keyed topic over many partitions lists a million keys a window) the
// merger rules such keys out before folding them (merge_prune.go): the
// thresholds are bounded from below by distinct keys' counts in one window
// each, every key from above by the sums of the entries hashing to its
// slot of a table, and a key below both is never placed nor summed
// (keyheat_merge_key_folds_total, keyheat_merge_pruned_entries_total); the
// thresholds, and so the reports, are those of the whole fold.
// Skew is
// the max/mean and Gini coefficient of the load per partition and per Redis
// Cluster node (slots mapped to the configured nodes), with the busiest
// slots and the shares of the top 1 and top 10 keys. Keys of Top whose
// lower-bound rate reaches the threshold the rules give are advised a local
// cache when reads are at least writes, otherwise a split into the next
// power of two (at least 2) of write rate / DetectOptions.SplitCapacity,
// the same rule the alerts use.
//
// On keyheat.windows the service commits CommitOffset, the lowest offset
// of a summary whose window is not yet reported and acknowledged, and
// keeps DoneThroughMs with it so a restart does not report a window twice.
// The merger reads no clock: a replay gives byte-identical reports; live,
// only windows released for silent or idle partitions, or by the cap,
// depend on timing.
//
// # Memory
//
// A partition's memory is bounded by its options, not by the number of
// distinct keys: Options.MemoryBound gives the bound and its formula, the
// exact tables (a 64-byte entry, two 4-byte index slots and a Bloom byte
// per key, and their key bytes) included.
// Windows and hot-key events handed out but never acknowledged are kept,
// a few dozen bytes each, until acknowledged. The Merger holds at most
// MergerOptions.MaxPendingWindows windows' summaries, and keeps the
// table it folds a window's keys into from one window to the next:
// about 140 bytes per key listed in the largest window it merged, so
// bounded by what summaries list (per partition and app, the top and big
// lists' capacities): about 140 MB at 1,000 partitions listing 1,024
// keys each, far less where keys are ruled out before the fold (the
// table of slot sums that rules them out is at most 5 MiB). It keeps the
// Count-Min sketches of the last window merged, at most, to decode the
// next summaries' into. A buffer more than four times the size the last
// window needed is freed, so a spike does not stay pinned.
//
// # Determinism
//
// The same events in the same order give byte-identical output: hashing is
// unseeded, every structure is fed in event order, windows, apps and keys
// are emitted sorted, alert ticks visit keys in (rule, app, key) order, and
// no map order or wall clock leaks in (Idle aside). TestGolden keeps a
// reviewed copy in testdata/.
package pipeline
