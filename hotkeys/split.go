package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/zeebo/xxh3"
)

// SplitConfig configures a Splitter.
type SplitConfig struct {
	// Lookup says whether a key is hot and what its entry asks for; the
	// registry follower's Get fits. It is called on every operation, so it
	// must be cheap and safe for concurrent use. Required.
	Lookup func(app, key string) (Entry, bool)
	// Logger logs folds; nil logs nothing. A line names a key by its
	// key_hash, and by the key itself too only with LogRawKeys.
	Logger *slog.Logger
	// LogRawKeys shows the keys themselves in the Splitter's log lines,
	// beside their key_hash.
	LogRawKeys bool
	// Registerer registers the Splitter's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Validate says what is wrong with c.
func (c SplitConfig) Validate() error {
	if c.Lookup == nil {
		return errors.New("split: Lookup is required (the registry follower's Get)")
	}
	return nil
}

// Splitter spreads the writes of a hot Redis key over several physical
// keys, its shards, while callers keep using the key's own name: a key
// whose entry says MitigationSplit with SplitFactor N is written to one of
// N shards (see MaxSplitFactor), and read by combining the key itself with
// every shard. Any other key is passed through as one plain command.
//
// Shards sit on N distinct Redis Cluster slots, none of them the key's
// (see the naming scheme in split_names.go: "{hk:<xxh3>:<c>}s:<key>"), so
// in a cluster a hot key's writes reach up to N nodes. A key holds one
// kind of value: a counter (Incr, Get), a set (SAdd, SRem, SMembers) or a
// sorted set (ZAdd, ZRem, ZRange).
//
// A Splitter remembers, per key, the largest factor it used since the
// key's last fold, and goes on reading (and removing members from) that
// many shards after the registry lowered the factor or the key cooled, so
// nothing it wrote goes unread; writes of a cooled key go to the key
// itself. It cannot know what other processes wrote: a process that never
// split the key reads it, and removes members from it, as a plain key once
// it cooled, and sees the shards' content only after a Fold (by any
// process) moved it into the key. So call Fold from the follower's
// OnChange when a key cools or its factor falls, in every process, and
// Reconcile periodically to catch what a callback missed; a key stays
// remembered until a fold after it cooled.
//
// The client decides how exact things are. A *redis.ClusterClient is a
// cluster; any other UniversalClient (a *redis.Client, a failover client)
// is taken for one node, where every operation and Fold is atomic. A
// *redis.Ring is refused: it spreads keys client-side, so neither the
// slots nor Lua scripts mean anything across its shards.
//
// Wired to the registry follower:
//
//	s, err := hotkeys.NewSplitter(rdb, hotkeys.SplitConfig{Lookup: follower.Get})
//	follower.OnChange(func(e hotkeys.Entry) {
//		if e.Status != hotkeys.StatusHot || e.Mitigation != hotkeys.MitigationSplit {
//			_ = s.Fold(ctx, e.App, e.Key, e.SplitFactor) // Reconcile retries
//		}
//	})
//	err = s.Incr(ctx, "shop", "views:product:42", 1)
//
// Stats reports what a Splitter did: per operation the calls on split
// keys and those passed through, the split calls' latencies, the folds,
// and per key it remembers its shards, writes and reads.
//
// A Splitter is safe for concurrent use and holds no goroutine.
type Splitter struct {
	rdb     redis.UniversalClient
	cluster bool
	lookup  func(app, key string) (Entry, bool)
	log     *slog.Logger
	rawKeys bool // SplitConfig.LogRawKeys
	m       *splitMetrics
	stats   splitCounters

	mu   sync.RWMutex
	keys map[splitKey]*splitState
}

type splitKey struct{ app, key string }

// splitState is what a Splitter remembers of a key it split: the largest
// factor since the key's last fold, and its shard names. A state is not
// changed once published; a larger one replaces it. The key's counters
// pass from a state to the next.
type splitState struct {
	factor int
	names  *splitNames
	shards []string // the names of shards 0 to factor-1
	kc     *splitKeyCounters
}

// NewSplitter returns a Splitter over rdb.
func NewSplitter(rdb redis.UniversalClient, cfg SplitConfig) (*Splitter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, errors.New("split: nil Redis client")
	}
	if _, ok := rdb.(*redis.Ring); ok {
		return nil, errors.New("split: a *redis.Ring places keys client-side, so shard slots and fold scripts mean nothing; use a *redis.Client or *redis.ClusterClient")
	}
	_, cluster := rdb.(*redis.ClusterClient)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Splitter{
		rdb:     rdb,
		cluster: cluster,
		lookup:  cfg.Lookup,
		log:     log,
		rawKeys: cfg.LogRawKeys,
		keys:    map[splitKey]*splitState{},
	}
	s.m = newSplitMetrics(cfg.Registerer, &s.stats)
	return s, nil
}

// route says how to serve an operation on key: write is the factor to
// write with (0: write the key itself), and st the shards to read (nil:
// read the key itself), which cover write. A key read or written split is
// remembered, so that a Reconcile folds it once it cools.
func (s *Splitter) route(app, key string) (write int, st *splitState) {
	if e, ok := s.lookup(app, key); ok && e.Mitigation == MitigationSplit && e.SplitFactor >= 2 {
		write = min(e.SplitFactor, MaxSplitFactor)
	}
	s.mu.RLock()
	st = s.keys[splitKey{app, key}]
	s.mu.RUnlock()
	if write == 0 || (st != nil && st.factor >= write) {
		return write, st
	}
	return write, s.remember(app, key, write)
}

// remember records that key was split with factor and returns its state.
func (s *Splitter) remember(app, key string, factor int) *splitState {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := splitKey{app, key}
	old := s.keys[k]
	if old != nil && old.factor >= factor {
		return old
	}
	var st *splitState
	if old != nil {
		st = newSplitState(key, factor, old, old.kc)
	} else {
		st = newSplitState(key, factor, nil, &splitKeyCounters{since: time.Now()})
	}
	s.keys[k] = st
	return st
}

// newSplitState returns the state of key split factor ways, with the key's
// counters kc, reusing the shard names of prev, if not nil, which stays
// valid for whoever holds it.
func newSplitState(key string, factor int, prev *splitState, kc *splitKeyCounters) *splitState {
	names := newSplitNames(key)
	if prev != nil {
		names.cands = append(make([]uint16, 0, factor), prev.names.cands...)
	}
	names.grow(factor)
	st := &splitState{factor: factor, names: names, shards: make([]string, factor), kc: kc}
	for i := range st.shards {
		if prev != nil && i < len(prev.shards) {
			st.shards[i] = prev.shards[i]
		} else {
			st.shards[i] = names.shard(i)
		}
	}
	return st
}

// written is called after a write with factor n succeeded: a fold may
// have lowered or dropped what this Splitter remembers of the key while
// the write was on its way, and the write's shard must stay among those
// read. A read that ran in between did not see the write, which had not
// returned yet.
func (s *Splitter) written(app, key string, n int) {
	s.mu.RLock()
	st := s.keys[splitKey{app, key}]
	s.mu.RUnlock()
	if st == nil || st.factor < n {
		st = s.remember(app, key, n)
	}
	st.kc.writes.Add(1)
}

// splitDone records a split call of op that began at t0.
func (s *Splitter) splitDone(op int, t0 time.Time) {
	s.stats.split[op].observe(time.Since(t0))
}

// readDone records a split read of op, of the key whose state is st, that
// began at t0.
func (s *Splitter) readDone(op int, st *splitState, t0 time.Time) {
	d := time.Since(t0)
	s.stats.split[op].observe(d)
	st.kc.reads.observe(d)
}

// ------------------------------------------------------------ counters

// Incr adds delta to the counter key. A split key's delta goes to one of
// its shards, chosen at random. Unlike INCRBY it does not return the new
// value: with the key split, no single Redis key holds it (Get sums).
func (s *Splitter) Incr(ctx context.Context, app, key string, delta int64) error {
	n, st := s.route(app, key)
	if n == 0 {
		s.stats.passed[splitOpIncr].Add(1)
		return s.rdb.IncrBy(ctx, key, delta).Err()
	}
	t0 := time.Now()
	err := s.rdb.IncrBy(ctx, st.shards[rand.IntN(n)], delta).Err()
	s.splitDone(splitOpIncr, t0)
	if err != nil {
		return err
	}
	s.written(app, key, n)
	return nil
}

// Get returns the counter key's value: the key itself plus every shard it
// may have (0 when none exists). On one node the keys are read with one
// MGET, so a Get sees every Incr and Fold wholly or not at all; a shard
// holding something other than a string reads as 0, as MGET reads it. In a
// cluster it takes two round trips, the shards and then the key, and
// corrects for the folds that ran between them (see Fold): each shard
// counts as of its read, the key as of its own.
func (s *Splitter) Get(ctx context.Context, app, key string) (int64, error) {
	_, st := s.route(app, key)
	if st == nil {
		s.stats.passed[splitOpGet].Add(1)
		v, err := s.rdb.Get(ctx, key).Int64()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		return v, err
	}
	t0 := time.Now()
	var (
		v   int64
		err error
	)
	if s.cluster {
		v, err = s.getCluster(ctx, key, st)
	} else {
		v, err = s.getNode(ctx, key, st)
	}
	s.readDone(splitOpGet, st, t0)
	return v, err
}

// getNode reads a counter on one node: one MGET.
func (s *Splitter) getNode(ctx context.Context, key string, st *splitState) (int64, error) {
	keys := make([]string, 0, 1+st.factor)
	keys = append(keys, key)
	keys = append(keys, st.shards...)
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return 0, err
	}
	var sum int64
	for i, v := range vals {
		if str, ok := v.(string); ok {
			n, err := splitInt(str, i)
			if err != nil {
				return 0, err
			}
			sum += n
		}
	}
	return sum, nil
}

// splitInt parses the value of the i-th key of a read (0 the key, i the
// shard i-1); an error names the key by position only.
func splitInt(v string, i int) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		which := "the key"
		if i > 0 {
			which = "shard " + strconv.Itoa(i-1)
		}
		return 0, fmt.Errorf("split get: %s holds %q, not an integer", which, v)
	}
	return n, nil
}

// getCluster reads a counter in a cluster: every shard with its fold
// record (one script per shard's slot), then the key with its fold notes.
// Per shard i it has the shard's value s_i, the number q_i of folds that
// claimed it so far, and the claim still pending, if any; then the key's
// value and the notes (i, q, amount) of the claims that reached it. The
// sum is the key, plus each s_i, plus each pending amount not yet noted
// (not in the key), minus the noted amounts of claims q > q_i: those ran
// after shard i was read, so the key holds an amount the read of s_i
// already counted, or that came after it.
func (s *Splitter) getCluster(ctx context.Context, key string, st *splitState) (int64, error) {
	n := st.factor
	cmds := make([]*redis.Cmd, n)
	read := func() error {
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range n {
				cmds[i] = p.EvalSha(ctx, splitReadShardScript.Hash(), []string{st.shards[i], st.names.foldRec(i)})
			}
			return nil
		})
		return err
	}
	err := read()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A pipeline cannot fall back to EVAL command by command: load
		// the script on every master (a new or restarted node lacks it)
		// and read again.
		if err := s.rdb.ScriptLoad(ctx, splitReadShardSrc).Err(); err != nil {
			return 0, fmt.Errorf("split get: load the shard read script: %w", err)
		}
		err = read()
	}
	if err != nil {
		return 0, err
	}
	type shardRead struct {
		value, seq int64
		pend       splitClaim
	}
	shards := make([]shardRead, n)
	for i, c := range cmds {
		vs, err := c.StringSlice()
		if err != nil {
			return 0, fmt.Errorf("split get: read shard %d: %w", i, err)
		}
		if len(vs) != 3 {
			return 0, fmt.Errorf("split get: read shard %d: %d values, want 3", i, len(vs))
		}
		r := &shards[i]
		if vs[0] != "" {
			if r.value, err = splitInt(vs[0], i+1); err != nil {
				return 0, err
			}
		}
		if r.seq, err = strconv.ParseInt(vs[1], 10, 64); err != nil {
			return 0, fmt.Errorf("split get: shard %d fold record seq %q", i, vs[1])
		}
		if vs[2] != "" {
			if r.pend, err = parseSplitClaim(vs[2]); err != nil {
				return 0, fmt.Errorf("split get: shard %d: %w", i, err)
			}
		}
	}
	res, err := splitReadKeyScript.Run(ctx, s.rdb, []string{key, splitFoldsKey(key)}).Slice()
	if err != nil {
		return 0, err
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("split get: read the key: %d values, want 2", len(res))
	}
	var sum int64
	if v, _ := res[0].(string); v != "" {
		if sum, err = splitInt(v, 0); err != nil {
			return 0, err
		}
	}
	notes, _ := res[1].([]any)
	noted := make(map[[2]int64]bool, len(notes)/2)
	for j := 0; j+1 < len(notes); j += 2 {
		f, _ := notes[j].(string)
		v, _ := notes[j+1].(string)
		i, q, amount, err := parseSplitNote(f, v)
		if err != nil {
			return 0, fmt.Errorf("split get: %w", err)
		}
		noted[[2]int64{i, q}] = true
		if i >= 0 && i < int64(n) && q > shards[i].seq {
			sum -= amount
		}
	}
	for i, r := range shards {
		sum += r.value
		if r.pend.seq > 0 && !noted[[2]int64{int64(i), r.pend.seq}] {
			sum += r.pend.amount
		}
	}
	return sum, nil
}

// ---------------------------------------------------------------- sets

// SAdd adds members to the set key. A split key's members go to one of
// its shards, chosen at random per call; a member may then sit in several
// shards, which the union a read takes does not mind. It does not return
// how many members were new: that would take a read of every shard.
func (s *Splitter) SAdd(ctx context.Context, app, key string, members ...string) error {
	if len(members) == 0 {
		return nil
	}
	n, st := s.route(app, key)
	if n == 0 {
		s.stats.passed[splitOpSAdd].Add(1)
		return s.rdb.SAdd(ctx, key, splitArgs(members)...).Err()
	}
	t0 := time.Now()
	err := s.rdb.SAdd(ctx, st.shards[rand.IntN(n)], splitArgs(members)...).Err()
	s.splitDone(splitOpSAdd, t0)
	if err != nil {
		return err
	}
	s.written(app, key, n)
	return nil
}

// SRem removes members from the set key: from the key itself and from
// every shard it may have (on one node in one script, atomically).
func (s *Splitter) SRem(ctx context.Context, app, key string, members ...string) error {
	if len(members) == 0 {
		return nil
	}
	_, st := s.route(app, key)
	if st == nil {
		s.stats.passed[splitOpSRem].Add(1)
		return s.rdb.SRem(ctx, key, splitArgs(members)...).Err()
	}
	t0 := time.Now()
	err := s.sremSplit(ctx, key, st, members)
	s.splitDone(splitOpSRem, t0)
	return err
}

func (s *Splitter) sremSplit(ctx context.Context, key string, st *splitState, members []string) error {
	keys := append([]string{key}, st.shards...)
	if !s.cluster {
		return splitRemScript.Run(ctx, s.rdb, keys, append([]any{"srem"}, splitArgs(members)...)...).Err()
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.SRem(ctx, k, splitArgs(members)...)
		}
		return nil
	})
	return err
}

// SMembers returns the members of the set key: the union of the key itself
// and its shards, in no particular order. On one node that is one SUNION.
func (s *Splitter) SMembers(ctx context.Context, app, key string) ([]string, error) {
	_, st := s.route(app, key)
	if st == nil {
		s.stats.passed[splitOpSMembers].Add(1)
		return s.rdb.SMembers(ctx, key).Result()
	}
	t0 := time.Now()
	out, err := s.smembersSplit(ctx, key, st)
	s.readDone(splitOpSMembers, st, t0)
	return out, err
}

func (s *Splitter) smembersSplit(ctx context.Context, key string, st *splitState) ([]string, error) {
	keys := append([]string{key}, st.shards...)
	if !s.cluster {
		return s.rdb.SUnion(ctx, keys...).Result()
	}
	// Shards first, then the key: a cluster fold adds a shard's members
	// to the key before it removes them from the shard, so a member the
	// shards no longer showed is in the key by the time it is read.
	seen := map[string]struct{}{}
	var out []string
	for _, group := range [][]string{keys[1:], keys[:1]} {
		cmds := make([]*redis.StringSliceCmd, len(group))
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range group {
				cmds[i] = p.SMembers(ctx, k)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		for _, c := range cmds {
			for _, m := range c.Val() {
				if _, ok := seen[m]; !ok {
					seen[m] = struct{}{}
					out = append(out, m)
				}
			}
		}
	}
	return out, nil
}

func splitArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// -------------------------------------------------------- sorted sets

// splitZHome is the shard a member of a sorted set split n ways lives in: its
// hash modulo n. Placing a member by its hash, not at random, keeps it in
// one shard, so a ZADD that changes its score replaces the old one as it
// would on one key. Under factor 2n a member's home is either its home
// under n or that plus n, so a write removes the member from its homes
// under every smaller and larger power of two it may have been written
// with (at most log2 of the factor keys), not from every shard.
func splitZHome(member string, n int) int { return int(xxh3.HashString(member) & uint64(n-1)) }

// splitZStale lists the homes of member under the powers of two up to read,
// other than home, and appends them to dst.
func splitZStale(dst []int, member string, home, read int) []int {
	h := xxh3.HashString(member)
	for k := 2; k <= read; k *= 2 {
		if i := int(h & uint64(k-1)); i != home && !splitHas(dst, i) {
			dst = append(dst, i)
		}
	}
	return dst
}

func splitHas(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ZAdd adds members to the sorted set key, or updates their scores. A
// split key's member goes to its home shard (see splitZHome) and leaves the key
// itself and its other possible homes; a key no longer split but not yet
// folded gets the member itself, which leaves the shards. So a member is in
// one place, and reads need not choose between two scores. On one node
// that is one script, atomic; in a cluster, a pipeline that removes before
// it adds (a read between may miss the member, never see it twice).
func (s *Splitter) ZAdd(ctx context.Context, app, key string, members ...redis.Z) error {
	if len(members) == 0 {
		return nil
	}
	n, st := s.route(app, key)
	if n == 0 {
		s.stats.passed[splitOpZAdd].Add(1)
		if st == nil {
			return s.rdb.ZAdd(ctx, key, members...).Err()
		}
		return s.zMove(ctx, key, st, 0, members, nil)
	}
	t0 := time.Now()
	err := s.zMove(ctx, key, st, n, members, nil)
	s.splitDone(splitOpZAdd, t0)
	if err != nil {
		return err
	}
	s.written(app, key, n)
	return nil
}

// ZRem removes members from the sorted set key: from the key itself and
// from every shard each member may live in.
func (s *Splitter) ZRem(ctx context.Context, app, key string, members ...string) error {
	if len(members) == 0 {
		return nil
	}
	_, st := s.route(app, key)
	if st == nil {
		s.stats.passed[splitOpZRem].Add(1)
		return s.rdb.ZRem(ctx, key, splitArgs(members)...).Err()
	}
	t0 := time.Now()
	err := s.zMove(ctx, key, st, 0, nil, members)
	s.splitDone(splitOpZRem, t0)
	return err
}

// zMove adds adds to their homes under factor n (the key itself when n is
// 0) and removes every member of adds and rems from the other places it
// may be: the key and its homes under the powers of two up to st.factor.
func (s *Splitter) zMove(ctx context.Context, key string, st *splitState, n int, adds []redis.Z, rems []string) error {
	// keys[0] is the key, then the shards involved; scripts get only the
	// keys they touch, as a cluster needs.
	idx := map[int]int{} // shard -> position in keys
	keys := []string{key}
	pos := func(shard int) int {
		if shard < 0 {
			return 0
		}
		if p, ok := idx[shard]; ok {
			return p
		}
		keys = append(keys, st.shards[shard])
		idx[shard] = len(keys) - 1
		return len(keys) - 1
	}
	type op struct {
		member string
		score  float64
		add    int   // position to add at, -1 for a removal
		from   []int // positions to remove from
	}
	ops := make([]op, 0, len(adds)+len(rems))
	var stale []int
	for _, z := range adds {
		m, ok := z.Member.(string)
		if !ok {
			return fmt.Errorf("split zadd: member %T, want string", z.Member)
		}
		home := -1
		if n > 0 {
			home = splitZHome(m, n)
		}
		o := op{member: m, score: z.Score, add: pos(home), from: []int{0}}
		for _, i := range splitZStale(stale[:0], m, home, st.factor) {
			o.from = append(o.from, pos(i))
		}
		ops = append(ops, o)
	}
	for _, m := range rems {
		o := op{member: m, add: -1, from: []int{0}}
		for _, i := range splitZStale(stale[:0], m, -1, st.factor) {
			o.from = append(o.from, pos(i))
		}
		ops = append(ops, o)
	}
	if !s.cluster {
		// ARGV: "zmove", then per member: member, score, add position
		// (1-based, 0 for none), count of positions to remove from, those.
		args := []any{"zmove"}
		for _, o := range ops {
			args = append(args, o.member, splitScore(o.score), o.add+1, len(o.from))
			for _, f := range o.from {
				args = append(args, f+1)
			}
		}
		return splitRemScript.Run(ctx, s.rdb, keys, args...).Err()
	}
	// Removals first: a pipeline to several nodes runs in no set order,
	// so the adds wait for them.
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range ops {
			for _, f := range o.from {
				if f != o.add {
					p.ZRem(ctx, keys[f], o.member)
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range ops {
			if o.add >= 0 {
				p.ZAdd(ctx, keys[o.add], redis.Z{Score: o.score, Member: o.member})
			}
		}
		return nil
	})
	return err
}

// ZRange returns the members of the sorted set args.Key with their
// scores, by rank or, with args.ByScore, by score, like ZRANGE … WITHSCORES
// with the same arguments (Rev, Offset and Count too; ByLex is not
// supported on a split key). Members of equal score are ordered by their
// bytes, as Redis orders them. A split key is read from the key itself and
// every shard (on one node in one MULTI/EXEC, so at one instant; in a
// cluster the shards, then the key), each asked for no more than the
// answer can need, and merged.
func (s *Splitter) ZRange(ctx context.Context, app string, args redis.ZRangeArgs) ([]redis.Z, error) {
	_, st := s.route(app, args.Key)
	if st == nil {
		s.stats.passed[splitOpZRange].Add(1)
		return s.rdb.ZRangeArgsWithScores(ctx, args).Result()
	}
	t0 := time.Now()
	out, err := s.zrangeSplit(ctx, args, st)
	s.readDone(splitOpZRange, st, t0)
	return out, err
}

func (s *Splitter) zrangeSplit(ctx context.Context, args redis.ZRangeArgs, st *splitState) ([]redis.Z, error) {
	if args.ByLex {
		return nil, errors.New("split zrange: ByLex is not supported on a split key")
	}
	keys := append([]string{args.Key}, st.shards...)
	// per is what each key is asked for: no more than the answer can
	// need from it (limited), or all of the range.
	per := args
	per.Offset, per.Count = 0, 0
	limited := false
	var start, stop int64
	if args.ByScore {
		if args.Count > 0 {
			per.Count = max(args.Offset, 0) + args.Count
			limited = true
		}
	} else {
		var err1, err2 error
		start, err1 = splitInt64(args.Start)
		stop, err2 = splitInt64(args.Stop)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("split zrange: start %v and stop %v must be integers for a range by rank", args.Start, args.Stop)
		}
		per.Start, per.Stop = int64(0), int64(-1)
		if start >= 0 && stop >= 0 {
			// The answer's last member is among the first stop+1 of the
			// key that holds it.
			per.Stop = stop
			limited = true
		}
	}
	fetch := func() ([][]redis.Z, error) {
		cmds := make([]*redis.ZSliceCmd, len(keys))
		ask := func(from, to int) func(p redis.Pipeliner) error {
			return func(p redis.Pipeliner) error {
				for i := from; i < to; i++ {
					a := per
					a.Key = keys[i]
					cmds[i] = p.ZRangeArgsWithScores(ctx, a)
				}
				return nil
			}
		}
		if !s.cluster {
			if _, err := s.rdb.TxPipelined(ctx, ask(0, len(keys))); err != nil {
				return nil, err
			}
		} else {
			// MULTI spans one slot only. Shards first, then the key: a
			// cluster fold puts a member in the key before it removes it
			// from its shard, so a member the shards no longer showed is
			// in the key by the time it is read.
			if _, err := s.rdb.Pipelined(ctx, ask(1, len(keys))); err != nil {
				return nil, err
			}
			if _, err := s.rdb.Pipelined(ctx, ask(0, 1)); err != nil {
				return nil, err
			}
		}
		out := make([][]redis.Z, len(cmds))
		for i, c := range cmds {
			out[i] = c.Val()
		}
		return out, nil
	}
	lists, err := fetch()
	if err != nil {
		return nil, err
	}
	merged, dups := splitZMerge(lists, args.Rev)
	if dups && limited {
		// A member found twice (written plain while shards held it, or a
		// cluster fold caught between its steps) took a place in some
		// key's first few: read whole keys.
		per.Count = 0
		if !args.ByScore {
			per.Stop = int64(-1)
		}
		if lists, err = fetch(); err != nil {
			return nil, err
		}
		merged, _ = splitZMerge(lists, args.Rev)
	}
	if args.ByScore {
		lo := min(int(max(args.Offset, 0)), len(merged))
		merged = merged[lo:]
		if args.Count > 0 && int(args.Count) < len(merged) {
			merged = merged[:args.Count]
		}
		return merged, nil
	}
	// Ranks as ZRANGE takes them: negative from the end, clamped.
	n := int64(len(merged))
	if start < 0 {
		start = max(n+start, 0)
	}
	if stop < 0 {
		stop = n + stop
	}
	if stop >= n {
		stop = n - 1
	}
	if start > stop || start >= n {
		return []redis.Z{}, nil
	}
	return merged[start : stop+1], nil
}

func splitInt64(v any) (int64, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("%T is not an integer", v)
}

// splitZMerge merges sorted lists (lists[0] the key's, then the shards') into
// one, ascending by score and then member bytes (descending both when
// rev). A member in more than one list is kept once, from the first list
// that has it: the key's copy is newer than a shard's, since only a plain
// ZADD after the key stopped being split puts it there while a shard has
// it. dups says whether any was dropped.
func splitZMerge(lists [][]redis.Z, rev bool) (out []redis.Z, dups bool) {
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	out = make([]redis.Z, 0, total)
	seen := make(map[string]struct{}, total)
	for _, l := range lists {
		for _, z := range l {
			m, _ := z.Member.(string)
			if _, ok := seen[m]; ok {
				dups = true
				continue
			}
			seen[m] = struct{}{}
			out = append(out, z)
		}
	}
	less := func(a, b redis.Z) int {
		switch {
		case a.Score < b.Score:
			return -1
		case a.Score > b.Score:
			return 1
		}
		am, _ := a.Member.(string)
		bm, _ := b.Member.(string)
		switch {
		case am < bm:
			return -1
		case am > bm:
			return 1
		}
		return 0
	}
	slices.SortFunc(out, func(a, b redis.Z) int {
		if rev {
			return less(b, a)
		}
		return less(a, b)
	})
	return out, dups
}
