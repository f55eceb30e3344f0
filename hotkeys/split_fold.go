package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyheat/keyheat/internal/keylog"
)

// Cluster fold timings (see Fold).
const (
	// splitFoldMemory is how long a key's fold notes outlive its last
	// fold; a shard's fold record lives twice as long, so that its claim
	// numbers never restart while notes of them exist.
	splitFoldMemory = 24 * time.Hour
	// splitNoteGrace is how long a note stays after its fold completed:
	// a Get whose two round trips are further apart than this may
	// miscount.
	splitNoteGrace = 10 * time.Minute
)

// Fold moves what the shards of key hold back into the key itself and
// deletes them, so that plain commands on the key see everything again:
// counters are added to the key, sets joined to it, and sorted-set members
// put in it with their shard's score, unless the key has the member
// already (only a plain ZADD after the key stopped being split puts a
// member there while a shard has it, so the key's score is the newer). It folds the first factor shards, or
// as many as this Splitter has used for the key since its last fold if
// that is more; pass the largest factor the key had (the cooled entry's
// SplitFactor, or MaxSplitFactor to be sure). Callers keep using the key
// throughout: a Fold may run while the key is still split and written.
// Folding twice, or from several processes at once, is harmless.
//
// What Fold guarantees depends on the client:
//
// One node (a *redis.Client, a failover client): the fold is one Lua
// script over the key and all its shards, so it is atomic. No increment,
// member or score is lost or counted twice, and every read (an MGET, SUNION
// or MULTI/EXEC) sees the fold wholly done or not begun: a read concurrent
// with a fold returns exactly what it would have without it.
//
// A cluster (*redis.ClusterClient): the key and its shards are on
// different slots, and a script may touch one slot only, so each shard is
// folded in steps, each a script on one slot. A counter shard's amount is
// first claimed: moved, on the shard's slot, into its fold record (a hash
// beside it) as claim number q of that shard, pending. Then it is added to
// the key, on the key's slot, by a script that also notes (shard, q,
// amount) in a hash there ("{<key's tag>}hk:folds:<key>") and adds only if
// that claim is not noted yet. Then the pending claim is cleared, and the
// note marked done; notes done for ten minutes are dropped. A fold that
// stopped half way (a crash, a timeout) leaves the claim pending, the next
// Fold of the key completes it, and the note makes the addition happen
// once. So a counter's amount is never lost, and reaches the key exactly
// once, provided the next Fold comes within a day (the notes expire a day
// after the key's last fold; past that, a claim left pending after its
// amount reached the key would be added again). Reads stay exact
// meanwhile: Get reads the shards first and the key second, and the notes
// tell it which amounts it met twice or not at all (see getCluster).
// Set members are added to the key before they are removed from the
// shard, and sorted-set members too (removed from the shard only if their
// score did not change meanwhile); SMembers and ZRange read the shards
// before the key, so they miss no member a fold moves. An SRem, ZAdd or
// ZRem of a member that runs between a fold's two steps may be undone by
// it.
func (s *Splitter) Fold(ctx context.Context, app, key string, factor int) error {
	n := min(max(factor, 0), MaxSplitFactor)
	s.mu.RLock()
	st := s.keys[splitKey{app, key}]
	s.mu.RUnlock()
	var writes uint64
	if st != nil {
		n = max(n, st.factor)
		writes = st.kc.writes.Load()
	}
	if n == 0 {
		return nil
	}
	names := newSplitNames(key)
	names.grow(n)
	var (
		moved int
		err   error
	)
	if s.cluster {
		moved, err = s.foldCluster(ctx, key, names, n)
	} else {
		moved, err = s.foldNode(ctx, key, names, n)
	}
	if err != nil {
		s.stats.foldErrors.Add(1)
		s.m.folds.WithLabelValues("error").Inc()
		return fmt.Errorf("split fold of %s key %016x: %w", app, names.keyHash(), err)
	}
	s.stats.folds.Add(1)
	s.stats.foldedShards.Add(uint64(moved))
	s.m.folds.WithLabelValues("ok").Inc()
	s.m.foldedShards.Add(float64(moved))
	s.log.Info("folded a split key", "app", app, keylog.Attr(key, s.rawKeys), "factor", n, "shards_folded", moved)
	s.forget(app, key, st, writes)
	return nil
}

// forget updates what the Splitter remembers of key after a fold that
// began when it remembered st, with writes acknowledged then (the key's
// count, which its states share): the factor in force now, with the key's
// counters, or nothing when the key is not split. It keeps the state when
// another replaced it meanwhile, or when a write was acknowledged during
// the fold: the write may have landed in a shard the fold had passed,
// beyond the factor in force now, and reads must go on seeing it until a
// later fold (Reconcile's) moves it.
func (s *Splitter) forget(app, key string, st *splitState, writes uint64) {
	w := 0
	if e, ok := s.lookup(app, key); ok && e.Mitigation == MitigationSplit && e.SplitFactor >= 2 {
		w = min(e.SplitFactor, MaxSplitFactor)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := splitKey{app, key}
	cur := s.keys[k]
	if cur == nil || cur != st || cur.factor == w || cur.kc.writes.Load() != writes {
		return
	}
	if w == 0 {
		delete(s.keys, k)
		return
	}
	s.keys[k] = newSplitState(key, w, nil, cur.kc)
}

// Reconcile folds every key this Splitter split whose registry entry no
// longer asks for the factor it used: the key cooled, or its factor fell.
// Call it periodically, or from the follower's OnChange, so that nothing
// stays in shards that reads no longer look at. It returns the folds'
// errors, joined; the keys that failed are tried again next time.
func (s *Splitter) Reconcile(ctx context.Context) error {
	type todo struct {
		k      splitKey
		factor int
	}
	var list []todo
	s.mu.RLock()
	for k, st := range s.keys {
		list = append(list, todo{k, st.factor})
	}
	s.mu.RUnlock()
	var errs []error
	for _, t := range list {
		if e, ok := s.lookup(t.k.app, t.k.key); ok && e.Mitigation == MitigationSplit && min(e.SplitFactor, MaxSplitFactor) >= t.factor {
			continue
		}
		if err := s.Fold(ctx, t.k.app, t.k.key, t.factor); err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// foldNode folds on one node: one script, atomic.
func (s *Splitter) foldNode(ctx context.Context, key string, names *splitNames, n int) (int, error) {
	keys := make([]string, 0, 1+n)
	keys = append(keys, key)
	for i := range n {
		keys = append(keys, names.shard(i))
	}
	return splitFoldScript.Run(ctx, s.rdb, keys).Int()
}

// foldCluster folds shard by shard as Fold describes.
func (s *Splitter) foldCluster(ctx context.Context, key string, names *splitNames, n int) (int, error) {
	types := make([]*redis.StatusCmd, n)
	pend := make([]*redis.BoolCmd, n)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			types[i] = p.Type(ctx, names.shard(i))
			pend[i] = p.HExists(ctx, names.foldRec(i), "pend")
		}
		return nil
	}); err != nil {
		return 0, err
	}
	moved := 0
	for i := range n {
		var err error
		switch t := types[i].Val(); {
		case t == "string" || pend[i].Val():
			err = s.foldClusterCounter(ctx, key, names, i)
		case t == "set":
			err = s.foldClusterSet(ctx, key, names.shard(i))
		case t == "zset":
			err = s.foldClusterZSet(ctx, key, names.shard(i))
		case t == "none":
			continue
		default:
			err = fmt.Errorf("shard %d is a %s, not a counter, set or sorted set", i, t)
		}
		if err != nil {
			return moved, fmt.Errorf("shard %d: %w", i, err)
		}
		moved++
	}
	return moved, nil
}

func (s *Splitter) foldClusterCounter(ctx context.Context, key string, names *splitNames, i int) error {
	shard, rec, notes := names.shard(i), names.foldRec(i), splitFoldsKey(key)
	// The first round may complete an earlier fold's pending claim; the
	// second then claims what the shard holds. More rounds mean others keep
	// folding the same shard, and they will finish it.
	for range 2 {
		claim, err := splitClaimScript.Run(ctx, s.rdb, []string{shard, rec}, int(2*splitFoldMemory/time.Second)).Text()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		c, err := parseSplitClaim(claim)
		if err != nil {
			return err
		}
		field := strconv.Itoa(i) + ":" + strconv.FormatInt(c.seq, 10)
		ttl := int(splitFoldMemory / time.Second)
		if err := splitApplyScript.Run(ctx, s.rdb, []string{key, notes}, field, c.amount, ttl).Err(); err != nil {
			return fmt.Errorf("add to the key: %w", err)
		}
		if err := splitClearScript.Run(ctx, s.rdb, []string{rec}, claim).Err(); err != nil {
			return fmt.Errorf("clear the claim: %w", err)
		}
		if err := splitDoneScript.Run(ctx, s.rdb, []string{notes}, field, splitNoteGrace.Milliseconds(), ttl).Err(); err != nil {
			return fmt.Errorf("mark the note done: %w", err)
		}
	}
	return nil
}

// splitClaim is a claim of a shard's amount by a cluster fold, as its fold
// record holds it while pending: "<seq>:<amount>".
type splitClaim struct{ seq, amount int64 }

func parseSplitClaim(v string) (splitClaim, error) {
	q, a, ok := strings.Cut(v, ":")
	var c splitClaim
	var err1, err2 error
	c.seq, err1 = strconv.ParseInt(q, 10, 64)
	c.amount, err2 = strconv.ParseInt(a, 10, 64)
	if !ok || err1 != nil || err2 != nil || c.seq <= 0 {
		return splitClaim{}, fmt.Errorf("fold claim %q is not <seq>:<amount>", v)
	}
	return c, nil
}

// parseSplitNote parses a note of the key's fold hash: field
// "<shard>:<seq>", value "<amount>" or "<amount>:<done unix ms>".
func parseSplitNote(field, value string) (shard, seq, amount int64, err error) {
	i, q, ok := strings.Cut(field, ":")
	a, _, _ := strings.Cut(value, ":")
	var e1, e2, e3 error
	shard, e1 = strconv.ParseInt(i, 10, 64)
	seq, e2 = strconv.ParseInt(q, 10, 64)
	amount, e3 = strconv.ParseInt(a, 10, 64)
	if !ok || e1 != nil || e2 != nil || e3 != nil {
		return 0, 0, 0, fmt.Errorf("fold note %q=%q is not <shard>:<seq>=<amount>[:<ms>]", field, value)
	}
	return shard, seq, amount, nil
}

func (s *Splitter) foldClusterSet(ctx context.Context, key, shard string) error {
	members, err := s.rdb.SMembers(ctx, shard).Result()
	if err != nil || len(members) == 0 {
		return err
	}
	if err := s.rdb.SAdd(ctx, key, splitArgs(members)...).Err(); err != nil {
		return err
	}
	return s.rdb.SRem(ctx, shard, splitArgs(members)...).Err()
}

func (s *Splitter) foldClusterZSet(ctx context.Context, key, shard string) error {
	zs, err := s.rdb.ZRangeWithScores(ctx, shard, 0, -1).Result()
	if err != nil || len(zs) == 0 {
		return err
	}
	if err := s.rdb.ZAddNX(ctx, key, zs...).Err(); err != nil {
		return err
	}
	args := make([]any, 0, 2*len(zs))
	for _, z := range zs {
		args = append(args, z.Member, splitScore(z.Score))
	}
	return splitZRemIfScript.Run(ctx, s.rdb, []string{shard}, args...).Err()
}

// splitScore writes a score as Redis reads it back.
func splitScore(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// splitFoldsKey names the set, on key's slot, of the cluster folds whose
// amount reached key. A name on key's slot is "{<key's tag>}…" when key
// has a tag, "{<key>}…" when key has no "}" to end the tag early, and
// otherwise "{hkc:<n>}…" with the first n whose slot is key's.
func splitFoldsKey(key string) string {
	const mark = "}hk:folds:"
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return "{" + key[s+1:s+1+e] + mark + key
		}
	}
	if key != "" && strings.IndexByte(key, '}') < 0 {
		return "{" + key + mark + key
	}
	want := uint16(Slot(key))
	base := splitCRC16(0, "hkc:")
	for n := 0; ; n++ {
		d := strconv.Itoa(n)
		if splitCRC16(base, d)&(splitSlots-1) == want {
			return "{hkc:" + d + mark + key
		}
	}
}

// splitReadShardSrc is splitReadShardScript's source, which a Get loads on
// every master when a node answers NOSCRIPT.
const splitReadShardSrc = `
return {redis.call('GET', KEYS[1]) or '', redis.call('HGET', KEYS[2], 'seq') or '0', redis.call('HGET', KEYS[2], 'pend') or ''}`

// Scripts. Each touches only the keys it is given, as a cluster requires;
// the one-node scripts are given keys on many slots, which one node allows.
var (
	// splitFoldScript folds KEYS[2..] into KEYS[1] by each shard's type.
	// A shard is deleted only after its content reached the key, so an
	// error (say the key holds another type) leaves it whole.
	splitFoldScript = redis.NewScript(`
local moved = 0
for i = 2, #KEYS do
  local k = KEYS[i]
  local t = redis.call('TYPE', k).ok
  if t == 'string' then
    redis.call('INCRBY', KEYS[1], redis.call('GET', k))
  elseif t == 'set' then
    redis.call('SUNIONSTORE', KEYS[1], KEYS[1], k)
  elseif t == 'zset' then
    local n = redis.call('ZCARD', k)
    for from = 0, n - 1, 1000 do
      local zs = redis.call('ZRANGE', k, from, from + 999, 'WITHSCORES')
      local args = {}
      for j = 1, #zs, 2 do
        args[#args + 1] = zs[j + 1]
        args[#args + 1] = zs[j]
      end
      redis.call('ZADD', KEYS[1], 'NX', unpack(args))
    end
  elseif t ~= 'none' then
    return redis.error_reply('shard ' .. (i - 2) .. ' is a ' .. t .. ', not a counter, set or sorted set')
  end
  if t ~= 'none' then
    redis.call('DEL', k)
    moved = moved + 1
  end
end
return moved`)

	// splitRemScript removes set members (ARGV[1] "srem": ARGV[2..] from
	// every key) or moves sorted-set members (ARGV[1] "zmove": per member
	// its name, score, the 1-based key to add it to or 0, the count of
	// keys to remove it from, and those keys).
	splitRemScript = redis.NewScript(`
if ARGV[1] == 'srem' then
  for i = 1, #KEYS do
    for j = 2, #ARGV, 1000 do
      redis.call('SREM', KEYS[i], unpack(ARGV, j, math.min(j + 999, #ARGV)))
    end
  end
  return 1
end
local j = 2
while j <= #ARGV do
  local m, score, add, nfrom = ARGV[j], ARGV[j + 1], tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  for f = 1, nfrom do
    local k = tonumber(ARGV[j + 3 + f])
    if k ~= add then
      redis.call('ZREM', KEYS[k], m)
    end
  end
  if add > 0 then
    redis.call('ZADD', KEYS[add], score, m)
  end
  j = j + 4 + nfrom
end
return 1`)

	// splitClaimScript claims the amount of shard KEYS[1] into its fold
	// record KEYS[2] and returns the claim "<seq>:<amount>"; a claim still
	// pending there is returned instead, and nil when the shard holds
	// nothing. ARGV[1] is the record's time to live, in seconds.
	splitClaimScript = redis.NewScript(`
local p = redis.call('HGET', KEYS[2], 'pend')
if p then return p end
local v = redis.call('GET', KEYS[1])
if not v then return false end
redis.call('DEL', KEYS[1])
if v == '0' then return false end
local claim = redis.call('HINCRBY', KEYS[2], 'seq', 1) .. ':' .. v
redis.call('HSET', KEYS[2], 'pend', claim)
redis.call('EXPIRE', KEYS[2], ARGV[1])
return claim`)

	// splitApplyScript adds ARGV[2] to the key KEYS[1] unless the claim
	// ARGV[1] ("<shard>:<seq>") is noted in KEYS[2] already, and notes it.
	// ARGV[3] is the notes' time to live, in seconds.
	splitApplyScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  redis.call('INCRBY', KEYS[1], ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1`)

	// splitClearScript clears the pending claim of fold record KEYS[1] if
	// it is still ARGV[1].
	splitClearScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'pend') == ARGV[1] then
  return redis.call('HDEL', KEYS[1], 'pend')
end
return 0`)

	// splitDoneScript marks note ARGV[1] of KEYS[2] done at the server's
	// time, and drops the notes done more than ARGV[2] ms ago. ARGV[3] is
	// the notes' time to live, in seconds.
	splitDoneScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and not string.find(v, ':') then
  redis.call('HSET', KEYS[1], ARGV[1], v .. ':' .. now)
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local done = string.match(all[i + 1], ':(%d+)$')
  if done and now - tonumber(done) > tonumber(ARGV[2]) then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1`)

	// splitReadShardScript returns shard KEYS[1] ('' when absent), the
	// claims of its fold record KEYS[2] so far ('0' when none) and its
	// pending claim ('' when none), at one instant.
	splitReadShardScript = redis.NewScript(splitReadShardSrc)

	// splitReadKeyScript returns the key KEYS[1] ('' when absent) and the
	// fold notes KEYS[2], at one instant.
	splitReadKeyScript = redis.NewScript(`
return {redis.call('GET', KEYS[1]) or '', redis.call('HGETALL', KEYS[2])}`)

	// splitZRemIfScript removes from KEYS[1] each member ARGV[i] whose
	// score is still ARGV[i+1].
	splitZRemIfScript = redis.NewScript(`
for i = 1, #ARGV, 2 do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and (s == ARGV[i + 1] or tonumber(s) == tonumber(ARGV[i + 1])) then
    redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return 1`)
)
