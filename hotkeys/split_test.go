package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

const splitTestApp = "shop"

// splitReg is a registry the test controls: key -> split factor (0: not
// hot).
type splitReg struct {
	mu sync.RWMutex
	m  map[string]int
}

func (r *splitReg) set(key string, factor int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]int{}
	}
	r.m[key] = factor
}

func (r *splitReg) lookup(app, key string) (Entry, bool) {
	r.mu.RLock()
	f := r.m[key]
	r.mu.RUnlock()
	if app != splitTestApp || f == 0 {
		return Entry{}, false
	}
	return Entry{App: app, Key: key, Status: StatusHot, Mitigation: MitigationSplit, SplitFactor: f}, true
}

// splitEnv is a Splitter over a real Redis, one node or a cluster.
type splitEnv struct {
	rdb    redis.UniversalClient
	prefix string
	reg    *splitReg
	s      *Splitter
	reg2   *prometheus.Registry
}

func newSplitEnv(t *testing.T, rdb redis.UniversalClient, prefix string) *splitEnv {
	t.Helper()
	e := &splitEnv{rdb: rdb, prefix: prefix, reg: &splitReg{}, reg2: prometheus.NewRegistry()}
	var err error
	e.s, err = NewSplitter(rdb, SplitConfig{Lookup: e.reg.lookup, Registerer: e.reg2})
	require.NoError(t, err)
	return e
}

// splitEnvs runs f against the shared Redis node and against a private
// one-node cluster, which enforces the cluster's one-slot rules.
func splitEnvs(t *testing.T, f func(t *testing.T, e *splitEnv)) {
	t.Run("node", func(t *testing.T) {
		rdb, prefix := testenv.RedisClient(t)
		f(t, newSplitEnv(t, rdb, prefix))
	})
	t.Run("cluster", func(t *testing.T) {
		f(t, newSplitEnv(t, testenv.PrivateRedisCluster(t), "c:"))
	})
}

func splitCtx(t *testing.T) context.Context {
	// A hang guard, not a deadline a slow machine should meet: 640,000
	// increments took 164 s beside six busy loops.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// physical lists the keys of e's Redis that exist for key: the key itself
// and any of its first 64 shards. (A cluster fold leaves the shards' fold
// records, which hold their claim numbers; see pendingClaims.)
func (e *splitEnv) physical(t *testing.T, ctx context.Context, key string) []string {
	t.Helper()
	names := newSplitNames(key)
	names.grow(64)
	all := []string{key}
	for i := range 64 {
		all = append(all, names.shard(i))
	}
	var out []string
	for _, k := range all {
		n, err := e.rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		if n > 0 {
			out = append(out, k)
		}
	}
	return out
}

// pendingClaims counts the cluster fold claims of key's first 64 shards
// that are still pending.
func (e *splitEnv) pendingClaims(t *testing.T, ctx context.Context, key string) int {
	t.Helper()
	names := newSplitNames(key)
	names.grow(64)
	n := 0
	for i := range 64 {
		ok, err := e.rdb.HExists(ctx, names.foldRec(i), "pend").Result()
		require.NoError(t, err)
		if ok {
			n++
		}
	}
	return n
}

// TestSplitCounterExact: 64 goroutines × 1,000 increments of a split
// counter sum to the exact total, spread over every shard, read the same
// before and after a fold, after which the key alone holds it.
func TestSplitCounterExact(t *testing.T) {
	splitEnvs(t, func(t *testing.T, e *splitEnv) {
		ctx := splitCtx(t)
		key := e.prefix + "counter"
		e.reg.set(key, 8)
		// The full 64 × 10,000 run is TestSplitCounterFoldConcurrent's,
		// with folds beside it; here it needs only enough to reach every
		// shard many times.
		const workers, each = 64, 1_000
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					if err := e.s.Incr(ctx, splitTestApp, key, 1); err != nil {
						errs <- fmt.Errorf("worker %d incr %d: %w", w, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, err := e.s.Get(ctx, splitTestApp, key)
		require.NoError(t, err)
		require.Equal(t, int64(workers*each), got)
		require.Len(t, e.physical(t, ctx, key), 8, "all 8 shards written, the key not")
		require.Equal(t, float64(workers*each), testutil.ToFloat64(e.s.m.ops[splitOpIncr][1]))

		require.NoError(t, e.s.Fold(ctx, splitTestApp, key, 8))
		got, err = e.s.Get(ctx, splitTestApp, key)
		require.NoError(t, err)
		require.Equal(t, int64(workers*each), got, "after the fold")
		require.Equal(t, []string{key}, e.physical(t, ctx, key), "the fold leaves the key alone")
		require.Zero(t, e.pendingClaims(t, ctx, key))
		plain, err := e.rdb.Get(ctx, key).Int64()
		require.NoError(t, err)
		require.Equal(t, int64(workers*each), plain, "a plain GET of the key")
		require.Equal(t, 1.0, testutil.ToFloat64(e.s.m.folds.WithLabelValues("ok")))
		require.Equal(t, 8.0, testutil.ToFloat64(e.s.m.foldedShards))
	})
}

// TestSplitCounterFoldConcurrent: folds run while 64 goroutines increment
// 10,000 times each (2,500 in a cluster), and the key's factor changes and
// it cools; a reader checks every Get
// against what was acknowledged before it began and what was started
// before it ended. Every read must fall in that range: a fold is neither
// missed nor counted twice, on one node nor in a cluster. The total is
// exact when the increments end, and after the last Reconcile folded the
// cooled key, when a plain GET of the key reads it.
func TestSplitCounterFoldConcurrent(t *testing.T) {
	splitEnvs(t, func(t *testing.T, e *splitEnv) {
		ctx := splitCtx(t)
		key := e.prefix + "counter"
		e.reg.set(key, 4)
		// A quarter of the increments in a cluster still gives it some
		// hundreds of folds and a thousand reads between them, at a
		// quarter of the time (its reads take two round trips).
		workers, each := 64, 10_000
		if e.s.cluster {
			each = 2_500
		}
		var started, done atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, workers+2)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					d := int64(1 + (w+i)%3)
					started.Add(d)
					if err := e.s.Incr(ctx, splitTestApp, key, d); err != nil {
						errs <- fmt.Errorf("worker %d incr %d: %w", w, i, err)
						return
					}
					done.Add(d)
				}
			})
		}
		stop := make(chan struct{})
		var bg sync.WaitGroup
		var folds, reads atomic.Int64
		bg.Go(func() { // folder, also moving the factor around
			factors := []int{4, 8, 16, 2, 0, 8}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%5 == 4 {
					e.reg.set(key, factors[(i/5)%len(factors)])
				}
				if err := e.s.Fold(ctx, splitTestApp, key, 16); err != nil {
					errs <- fmt.Errorf("fold: %w", err)
					return
				}
				folds.Add(1)
			}
		})
		bg.Go(func() { // reader
			for {
				select {
				case <-stop:
					return
				default:
				}
				lo := done.Load()
				v, err := e.s.Get(ctx, splitTestApp, key)
				hi := started.Load()
				if err != nil {
					errs <- fmt.Errorf("get: %w", err)
					return
				}
				reads.Add(1)
				if v < lo || v > hi {
					errs <- fmt.Errorf("read %d outside [%d, %d]: a concurrent fold was missed or counted twice", v, lo, hi)
					return
				}
			}
		})
		wg.Wait()
		close(stop)
		bg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		total := started.Load()
		require.Positive(t, folds.Load())
		require.Positive(t, reads.Load())
		t.Logf("%d folds and %d reads during %d increments", folds.Load(), reads.Load(), workers*each)

		// Whatever the registry says last, the Splitter remembers the
		// largest factor it used, so its reads are complete.
		got, err := e.s.Get(ctx, splitTestApp, key)
		require.NoError(t, err)
		require.Equal(t, total, got)
		e.reg.set(key, 0)
		require.NoError(t, e.s.Reconcile(ctx))
		require.Equal(t, []string{key}, e.physical(t, ctx, key), "Reconcile folded a cooled key")
		require.Zero(t, e.pendingClaims(t, ctx, key))
		require.Empty(t, e.s.keys, "nothing remembered after the fold of a cooled key")
		plain, err := e.rdb.Get(ctx, key).Int64()
		require.NoError(t, err)
		require.Equal(t, total, plain)
	})
}

// TestSplitMembersFoldConcurrent: folds run while 8 goroutines add new
// members to a split set and a split sorted set; every read must hold each
// member whose add returned before the read began (with its score), and
// none that was not added: a fold hides no member, on one node nor in a
// cluster.
func TestSplitMembersFoldConcurrent(t *testing.T) {
	splitEnvs(t, func(t *testing.T, e *splitEnv) {
		ctx := splitCtx(t)
		set, board := e.prefix+"members", e.prefix+"board"
		e.reg.set(set, 8)
		e.reg.set(board, 8)
		const writers, each = 8, 300
		var started, acked [writers]atomic.Int64
		score := func(w, i int) float64 { return float64((w*7919+i*104729)%1000) / 8 }
		name := func(w, i int) string { return fmt.Sprintf("w%d-%04d", w, i) }
		var wg sync.WaitGroup
		errs := make(chan error, writers+2)
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					started[w].Store(int64(i + 1))
					m := name(w, i)
					if err := e.s.SAdd(ctx, splitTestApp, set, m); err != nil {
						errs <- err
						return
					}
					if err := e.s.ZAdd(ctx, splitTestApp, board, redis.Z{Score: score(w, i), Member: m}); err != nil {
						errs <- err
						return
					}
					acked[w].Store(int64(i + 1))
				}
			})
		}
		stop := make(chan struct{})
		var bg sync.WaitGroup
		var folds, reads atomic.Int64
		bg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%4 == 3 {
					f := []int{8, 16, 4, 0}[(i/4)%4]
					e.reg.set(set, f)
					e.reg.set(board, f)
				}
				for _, k := range []string{set, board} {
					if err := e.s.Fold(ctx, splitTestApp, k, 16); err != nil {
						errs <- fmt.Errorf("fold: %w", err)
						return
					}
				}
				folds.Add(1)
			}
		})
		check := func(got map[string]float64, lo, hi [writers]int64) error {
			for w := range writers {
				for i := range int(lo[w]) {
					sc, ok := got[name(w, i)]
					if !ok {
						return fmt.Errorf("member %s, added before the read, is missing", name(w, i))
					}
					if sc != score(w, i) && sc != -1 {
						return fmt.Errorf("member %s has score %v, want %v", name(w, i), sc, score(w, i))
					}
				}
			}
			for m := range got {
				var w, i int
				if _, err := fmt.Sscanf(m, "w%d-%d", &w, &i); err != nil || w >= writers || int64(i) >= hi[w] {
					return fmt.Errorf("member %q was not added before the read ended", m)
				}
			}
			return nil
		}
		bg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var lo, hi [writers]int64
				for w := range writers {
					lo[w] = acked[w].Load()
				}
				members, err := e.s.SMembers(ctx, splitTestApp, set)
				if err != nil {
					errs <- err
					return
				}
				zs, err := e.s.ZRange(ctx, splitTestApp, redis.ZRangeArgs{Key: board, Start: 0, Stop: -1})
				if err != nil {
					errs <- err
					return
				}
				for w := range writers {
					hi[w] = started[w].Load()
				}
				got := map[string]float64{}
				for _, m := range members {
					got[m] = -1
				}
				if err := check(got, lo, hi); err != nil {
					errs <- fmt.Errorf("set: %w", err)
					return
				}
				got = map[string]float64{}
				for _, z := range zs {
					got[z.Member.(string)] = z.Score
				}
				if err := check(got, lo, hi); err != nil {
					errs <- fmt.Errorf("sorted set: %w", err)
					return
				}
				reads.Add(1)
			}
		})
		wg.Wait()
		close(stop)
		bg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		require.Positive(t, folds.Load())
		require.Positive(t, reads.Load())
		t.Logf("%d folds and %d reads during %d adds", folds.Load(), reads.Load(), 2*writers*each)
		e.reg.set(set, 0)
		e.reg.set(board, 0)
		require.NoError(t, e.s.Reconcile(ctx))
		n, err := e.rdb.SCard(ctx, set).Result()
		require.NoError(t, err)
		require.Equal(t, int64(writers*each), n)
		n, err = e.rdb.ZCard(ctx, board).Result()
		require.NoError(t, err)
		require.Equal(t, int64(writers*each), n)
	})
}

// TestSplitClusterFoldResumes: a cluster fold that stopped after claiming
// a shard's amount, or after adding it to the key, is completed by the
// next Fold, and the amount reaches the key exactly once; reads count it
// once at every step.
func TestSplitClusterFoldResumes(t *testing.T) {
	e := newSplitEnv(t, testenv.PrivateRedisCluster(t), "c:")
	ctx := splitCtx(t)
	key := "{tenant}counter"
	e.reg.set(key, 4)
	names := newSplitNames(key)
	names.grow(4)
	notes := splitFoldsKey(key)
	for i := range 4 {
		require.NoError(t, e.rdb.IncrBy(ctx, names.shard(i), int64(10*(i+1))).Err())
	}
	get := func(want int64, when string) {
		t.Helper()
		got, err := e.s.Get(ctx, splitTestApp, key)
		require.NoError(t, err)
		require.Equal(t, want, got, when)
	}
	get(100, "before any fold")
	// Shard 0: claimed, then the folder died.
	claim, err := splitClaimScript.Run(ctx, e.rdb, []string{names.shard(0), names.foldRec(0)}, 60).Text()
	require.NoError(t, err)
	require.Equal(t, "1:10", claim)
	get(100, "shard 0 claimed")
	// Shard 1: claimed and added to the key, then the folder died; then
	// the shard is written again.
	claim, err = splitClaimScript.Run(ctx, e.rdb, []string{names.shard(1), names.foldRec(1)}, 60).Text()
	require.NoError(t, err)
	require.Equal(t, "1:20", claim)
	require.NoError(t, splitApplyScript.Run(ctx, e.rdb, []string{key, notes}, "1:1", "20", 60).Err())
	get(100, "shard 1's claim in the key, still pending")
	require.NoError(t, e.rdb.IncrBy(ctx, names.shard(1), 5).Err())
	get(105, "shard 1 written after its claim")

	require.NoError(t, e.s.Fold(ctx, splitTestApp, key, 4))
	get(105, "after the fold")
	require.NoError(t, e.s.Fold(ctx, splitTestApp, key, 4))
	plain, err := e.rdb.Get(ctx, key).Int64()
	require.NoError(t, err)
	require.Equal(t, int64(105), plain)
	require.Equal(t, []string{key}, e.physical(t, ctx, key))
	require.Zero(t, e.pendingClaims(t, ctx, key))
	seq, err := e.rdb.HGet(ctx, names.foldRec(1), "seq").Int()
	require.NoError(t, err)
	require.Equal(t, 2, seq, "shard 1 claimed twice")
	ttl, err := e.rdb.TTL(ctx, notes).Result()
	require.NoError(t, err)
	require.Positive(t, ttl, "the notes expire")
}

// TestSplitSetModel: a split set, under adds, removals, factor changes and
// cooling, reads as one plain set given the same operations, before and
// after every fold; a fold leaves the key alone holding it.
func TestSplitSetModel(t *testing.T) {
	splitEnvs(t, func(t *testing.T, e *splitEnv) {
		ctx := splitCtx(t)
		key, model := e.prefix+"{set}hot", e.prefix+"model-set"
		rng := rand.New(rand.NewPCG(7, 8))
		member := func() string { return fmt.Sprintf("m%03d\x00%c", rng.IntN(300), 'a'+rng.IntN(3)) }
		check := func(when string) {
			t.Helper()
			got, err := e.s.SMembers(ctx, splitTestApp, key)
			require.NoError(t, err)
			want, err := e.rdb.SMembers(ctx, model).Result()
			require.NoError(t, err)
			slices.Sort(got)
			slices.Sort(want)
			require.Equal(t, want, got, when)
		}
		factors := []int{8, 2, 16, 4, 0, 8}
		for round, f := range factors {
			e.reg.set(key, f)
			for range 400 {
				ms := []string{member(), member()}
				if rng.IntN(4) == 0 {
					require.NoError(t, e.s.SRem(ctx, splitTestApp, key, ms...))
					require.NoError(t, e.rdb.SRem(ctx, model, splitArgs(ms)...).Err())
				} else {
					require.NoError(t, e.s.SAdd(ctx, splitTestApp, key, ms...))
					require.NoError(t, e.rdb.SAdd(ctx, model, splitArgs(ms)...).Err())
				}
			}
			check(fmt.Sprintf("round %d, factor %d, before the fold", round, f))
			if round%2 == 1 {
				require.NoError(t, e.s.Reconcile(ctx))
			} else {
				require.NoError(t, e.s.Fold(ctx, splitTestApp, key, f))
			}
			check(fmt.Sprintf("round %d, factor %d, after the fold", round, f))
		}
		e.reg.set(key, 0)
		require.NoError(t, e.s.Fold(ctx, splitTestApp, key, 16))
		require.Equal(t, []string{key}, e.physical(t, ctx, key))
		plain, err := e.rdb.SMembers(ctx, key).Result()
		require.NoError(t, err)
		want, err := e.rdb.SMembers(ctx, model).Result()
		require.NoError(t, err)
		require.ElementsMatch(t, want, plain, "a plain SMEMBERS after the last fold")
	})
}

// TestSplitZSetModel: a split sorted set, under adds, score changes up and
// down, removals, factor changes and cooling, answers every range (by
// rank, by score, reversed, with offsets) as one plain sorted set given
// the same operations, before and after folds.
func TestSplitZSetModel(t *testing.T) {
	splitEnvs(t, func(t *testing.T, e *splitEnv) {
		ctx := splitCtx(t)
		key, model := e.prefix+"board", e.prefix+"model-board"
		rng := rand.New(rand.NewPCG(9, 10))
		member := func() string { return fmt.Sprintf("p%03d", rng.IntN(250)) }
		score := func() float64 { return float64(rng.IntN(40)) / 4 } // many ties
		ranges := []redis.ZRangeArgs{
			{Start: 0, Stop: -1},
			{Start: 0, Stop: 9},
			{Start: 5, Stop: 24, Rev: true},
			{Start: -10, Stop: -1},
			{Start: -300, Stop: 3, Rev: true},
			{Start: 17, Stop: 5},
			{Start: "2", Stop: "(7.5", ByScore: true},
			{Start: "-inf", Stop: "+inf", ByScore: true, Offset: 10, Count: 15},
			{Start: "8", Stop: "1", ByScore: true, Rev: true, Offset: 3, Count: 20},
			{Start: "(5", Stop: "+inf", ByScore: true, Offset: 2, Count: -1},
		}
		check := func(when string) {
			t.Helper()
			for _, r := range ranges {
				a, m := r, r
				a.Key, m.Key = key, model
				got, err := e.s.ZRange(ctx, splitTestApp, a)
				require.NoError(t, err)
				want, err := e.rdb.ZRangeArgsWithScores(ctx, m).Result()
				require.NoError(t, err)
				if len(want) == 0 {
					want = []redis.Z{}
				}
				if len(got) == 0 {
					got = []redis.Z{}
				}
				require.Equal(t, want, got, "%s: range %+v", when, r)
			}
		}
		for round, f := range []int{4, 16, 2, 8, 0, 32} {
			e.reg.set(key, f)
			for range 300 {
				if rng.IntN(5) == 0 {
					ms := []string{member(), member()}
					require.NoError(t, e.s.ZRem(ctx, splitTestApp, key, ms...))
					require.NoError(t, e.rdb.ZRem(ctx, model, splitArgs(ms)...).Err())
					continue
				}
				zs := []redis.Z{{Score: score(), Member: member()}, {Score: score(), Member: member()}}
				if zs[0].Member == zs[1].Member {
					zs = zs[:1]
				}
				require.NoError(t, e.s.ZAdd(ctx, splitTestApp, key, zs...))
				require.NoError(t, e.rdb.ZAdd(ctx, model, zs...).Err())
			}
			check(fmt.Sprintf("round %d, factor %d, before the fold", round, f))
			if round%2 == 0 {
				require.NoError(t, e.s.Fold(ctx, splitTestApp, key, f))
				check(fmt.Sprintf("round %d, factor %d, after the fold", round, f))
			}
		}
		e.reg.set(key, 0)
		require.NoError(t, e.s.Reconcile(ctx))
		require.Equal(t, []string{key}, e.physical(t, ctx, key))
		plain, err := e.rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		require.NoError(t, err)
		want, err := e.rdb.ZRangeWithScores(ctx, model, 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, want, plain, "a plain ZRANGE after the last fold")
	})
}

// TestSplitPassThrough: a key that is not split is one plain command, and
// an app other than the entry's is not split.
func TestSplitPassThrough(t *testing.T) {
	rdb, prefix := testenv.RedisClient(t)
	e := newSplitEnv(t, rdb, prefix)
	ctx := splitCtx(t)
	key := prefix + "plain"
	e.reg.set(key, 8)
	require.NoError(t, e.s.Incr(ctx, "other-app", key, 5))
	require.NoError(t, e.s.Incr(ctx, "other-app", key, 2))
	require.Equal(t, []string{key}, e.physical(t, ctx, key))
	v, err := e.s.Get(ctx, "other-app", key)
	require.NoError(t, err)
	require.Equal(t, int64(7), v)
	v, err = e.s.Get(ctx, "other-app", prefix+"missing")
	require.NoError(t, err)
	require.Equal(t, int64(0), v)
	require.Equal(t, 2.0, testutil.ToFloat64(e.s.m.ops[splitOpIncr][0]))
	require.NoError(t, e.s.Fold(ctx, "other-app", key, 0), "folding an unsplit key does nothing")
}

func TestSplitErrors(t *testing.T) {
	_, err := NewSplitter(redis.NewClient(&redis.Options{}), SplitConfig{})
	require.ErrorContains(t, err, "Lookup is required")
	_, err = NewSplitter(nil, SplitConfig{Lookup: (&splitReg{}).lookup})
	require.ErrorContains(t, err, "nil Redis client")
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	_, err = NewSplitter(ring, SplitConfig{Lookup: (&splitReg{}).lookup})
	require.ErrorContains(t, err, "Ring")

	rdb, prefix := testenv.RedisClient(t)
	e := newSplitEnv(t, rdb, prefix)
	ctx := splitCtx(t)
	key := prefix + "str"
	e.reg.set(key, 4)
	require.NoError(t, e.s.SAdd(ctx, splitTestApp, key, "a"))
	require.NoError(t, rdb.Set(ctx, key, "not a number", 0).Err())
	err = e.s.Fold(ctx, splitTestApp, key, 4)
	require.Error(t, err)
	require.False(t, strings.Contains(err.Error(), key), "errors name the key by its hash only: %v", err)
	require.Equal(t, 1.0, testutil.ToFloat64(e.s.m.folds.WithLabelValues("error")))
	members, err := rdb.SUnion(ctx, e.physical(t, ctx, key)[1:]...).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, members, "a failed fold leaves the shard whole")
	_, err = e.s.ZRange(ctx, splitTestApp, redis.ZRangeArgs{Key: key, Start: "[a", Stop: "[b", ByLex: true})
	require.ErrorContains(t, err, "ByLex")
}

// TestSplitClusterSlots: Slot agrees with CLUSTER KEYSLOT on random keys,
// binary and tagged, and the shards of a key are on distinct slots as the
// server sees them.
func TestSplitClusterSlots(t *testing.T) {
	rdb := testenv.PrivateRedisCluster(t)
	ctx := splitCtx(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, key := range splitTestKeys(rng, 300) {
		want, err := rdb.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, int(want), Slot(key), "key %q", key)
		names := newSplitNames(key)
		names.grow(16)
		seen := map[int64]bool{want: true}
		for i := range 16 {
			s, err := rdb.ClusterKeySlot(ctx, names.shard(i)).Result()
			require.NoError(t, err)
			require.False(t, seen[s], "key %q shard %d on slot %d twice", key, i, s)
			seen[s] = true
		}
	}
}

func TestRedisGet(t *testing.T) {
	rdb, prefix := testenv.RedisClient(t)
	ctx := splitCtx(t)
	require.NoError(t, rdb.Set(ctx, prefix+"v", "\x00bytes", 0).Err())
	require.NoError(t, rdb.Set(ctx, prefix+"empty", "", 0).Err())
	v, err := RedisGet(rdb, prefix+"v")(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("\x00bytes"), v)
	v, err = RedisGet(rdb, prefix+"empty")(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte{}, v, "an empty value is a value")
	_, err = RedisGet(rdb, prefix+"missing")(ctx)
	require.True(t, errors.Is(err, ErrNotFound), "missing key: %v", err)
	require.NoError(t, rdb.SAdd(ctx, prefix+"set", "a").Err())
	_, err = RedisGet(rdb, prefix+"set")(ctx)
	require.ErrorContains(t, err, "WRONGTYPE")
}
