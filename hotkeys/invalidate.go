package hotkeys

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/schemas"
)

// Invalidation records on the invalidation topic (CacheConfig.Topic):
//
//	key:   schemas.HotKeyRecordKey(app, key), so a key's invalidations
//	       land on one partition, in order
//	value: {"v":1,"origin":"<32 hex digits>"}
//
// origin is the sending Cache's random ID: a Cache skips its own records,
// having evicted locally before it sent them. A reader evicts on any
// record whose key it can parse, whatever its version: evicting is always
// safe.
const invalidationVersion = 1

type invalidationValue struct {
	Version int    `json:"v"`
	Origin  string `json:"origin"`
}

// parseRecordKey splits a schemas.HotKeyRecordKey into app and key. Its
// errors never quote b: a record key holds a raw key, which no log may
// show (Entry.KeyHash is the only form of a key in logs).
func parseRecordKey(b []byte) (app, key string, err error) {
	i := 0
	for i < len(b) && i < 10 && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || i == len(b) || b[i] != ':' || (i > 1 && b[0] == '0') {
		return "", "", fmt.Errorf("record key of %d bytes does not start with <app length>:", len(b))
	}
	n, err := strconv.Atoi(string(b[:i]))
	if err != nil || n > len(b)-i-1 {
		return "", "", fmt.Errorf("record key of %d bytes: its app length %d is beyond its end", len(b), n)
	}
	rest := b[i+1:]
	return string(rest[:n]), string(rest[n:]), nil
}

// broadcaster is the Kafka side of a Cache: the client that produces
// invalidations and lists where to start following them.
type broadcaster struct {
	topic  string
	opts   []kgo.Opt
	origin string
	value  []byte // this Cache's invalidation record value
	cl     *kgo.Client
	log    *slog.Logger
}

func newBroadcaster(topic string, opts []kgo.Opt, log *slog.Logger) (*broadcaster, error) {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never returns an error
	b := &broadcaster{topic: topic, opts: opts, origin: hex.EncodeToString(id[:]), log: log}
	v, err := json.Marshal(invalidationValue{Version: invalidationVersion, Origin: b.origin})
	if err != nil {
		return nil, fmt.Errorf("hotkeys: encode invalidation: %w", err)
	}
	b.value = v
	// The caller's options first, so that ours win where they overlap.
	b.cl, err = kgo.NewClient(append(opts[:len(opts):len(opts)], kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return nil, fmt.Errorf("hotkeys: kafka client for invalidations on %s: %w", topic, err)
	}
	return b, nil
}

func (b *broadcaster) close() { b.cl.Close() }

// Invalidate drops (app, key)'s value in this process, marks a load of it
// in flight so that its result is not kept, then broadcasts the
// invalidation on the topic and waits until Kafka acknowledged it (or ctx
// ends). Call it after the write to the backing store, never before: a
// load between an early Invalidate and the write would keep the old value.
//
// After Invalidate returns, no Get in this process that starts then or
// later returns a value loaded before Invalidate was called (a Get already
// waiting for a load may get that load's result). Another process does
// the same from the moment it reads the record, usually milliseconds
// later; until then, or if it never reads it (it is not following the
// topic yet, or lost records), it serves the old value for at most the
// key's local TTL, or MaxStaleAge when it serves it stale.
//
// An error says the broadcast was not acknowledged: the local eviction is
// done, other processes may not have been told. A LocalOnly cache
// broadcasts nothing and returns nil.
func (c *Cache) Invalidate(ctx context.Context, app, key string) error {
	if c.closed.Load() {
		return ErrCacheClosed
	}
	c.invalidateLocal(app, key)
	if c.bc == nil {
		return nil
	}
	rec := &kgo.Record{Topic: c.bc.topic, Key: schemas.HotKeyRecordKey(app, key), Value: c.bc.value}
	if err := c.bc.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("hotkeys: broadcast invalidation on %s: %w", c.bc.topic, err)
	}
	c.st.invSent.Add(1)
	return nil
}

// invalidateLocal drops (app, key)'s value and detaches its flight, if
// any: see flight for why that is enough.
func (c *Cache) invalidateLocal(app, key string) {
	h := c.tab.hash(key)
	c.tab.mu.Lock()
	defer c.tab.mu.Unlock()
	ks := c.tab.lookup(h, app, key)
	if ks == nil {
		return
	}
	ks.counters.invalidations.Add(1)
	c.tab.setValueLocked(ks, nil)
	ks.flight = nil
}

// purge drops every value and detaches every flight: the cache may have
// missed invalidations.
func (c *Cache) purge() {
	c.tab.mu.Lock()
	defer c.tab.mu.Unlock()
	c.tab.dropValuesLocked()
	c.st.purges.Add(1)
}

// Bounds of the wait between two attempts to follow the topic again after
// fetching failed: the wait doubles while attempts keep failing, and is
// back at its least once a fetch brought records.
const (
	refollowMinBackoff = 250 * time.Millisecond
	refollowMaxBackoff = 10 * time.Second
)

// follow positions a consumer at the end of every partition of the topic,
// marks the cache following, and evicts on every invalidation read until
// Close. When fetching fails it stops following and starts over at the
// topic's end (refollow).
func (c *Cache) follow() {
	defer c.wg.Done()
	offsets, ok := c.endOffsets()
	if !ok {
		return
	}
	opts := append(c.bc.opts[:len(c.bc.opts):len(c.bc.opts)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.bc.topic: offsets}),
		// Records lost under the consumer cannot be located; the
		// purge below covers them, so re-reading is useless.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	cons, err := kgo.NewClient(opts...)
	if err != nil {
		c.log.Error("hot-key cache: cannot follow invalidations: values will not be kept", "topic", c.bc.topic, "err", err)
		return
	}
	defer cons.Close()
	c.setFollowing(true)
	c.log.Info("hot-key cache follows invalidations", "topic", c.bc.topic, "partitions", len(offsets))
	backoff := refollowMinBackoff
	for {
		fs := cons.PollFetches(c.ctx)
		if c.ctx.Err() != nil {
			return
		}
		fs.EachRecord(c.receive)
		var first error
		errs := 0
		fs.EachError(func(_ string, p int32, err error) {
			if first == nil {
				first = fmt.Errorf("partition %d: %w", p, err)
			}
			errs++
		})
		if first == nil {
			backoff = refollowMinBackoff
			continue
		}
		// kgo retries what can be retried; what reaches here may have
		// cost records, or means the consumer will read no more: a topic
		// deleted and recreated fails with UNKNOWN_TOPIC_ID for good
		// (kgo never adopts the new topic's ID), data was lost, access
		// was denied.
		c.stopFollowing()
		c.log.Warn("hot-key cache: fetching invalidations failed; dropped every cached value and keeps none until it follows the topic again",
			"topic", c.bc.topic, "err", first, "failed_partitions", errs, "retry_in", backoff)
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, refollowMaxBackoff)
		if !c.refollow(cons) {
			return
		}
	}
}

// stopFollowing marks the cache not following, then drops every value
// and detaches every flight. In that order: a flight started under
// table.mu before the purge is detached by it, and one started after it
// sees the cache not following and keeps nothing.
func (c *Cache) stopFollowing() {
	c.setFollowing(false)
	c.st.followLosses.Add(1)
	c.purge()
}

// refollow starts consuming the topic over from its end: kgo is told to
// forget the topic (the only way it follows a topic recreated under the
// same name), the end offsets are listed anew, and the consumer starts
// there. It marks the cache following again, as follow did at the start,
// and reports false when the cache closed meanwhile.
func (c *Cache) refollow(cons *kgo.Client) bool {
	// The producer too: kgo fails every record produced to a recreated
	// topic until it is purged.
	c.bc.cl.PurgeTopicsFromClient(c.bc.topic)
	cons.PurgeTopicsFromClient(c.bc.topic)
	offsets, ok := c.endOffsets()
	if !ok {
		return false
	}
	cons.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.bc.topic: offsets})
	c.setFollowing(true)
	c.log.Info("hot-key cache follows invalidations again", "topic", c.bc.topic, "partitions", len(offsets))
	return true
}

// endOffsets lists the end offset of every partition of the topic,
// retrying until it succeeds or the cache closes.
func (c *Cache) endOffsets() (map[int32]kgo.Offset, bool) {
	adm := kadm.NewClient(c.bc.cl)
	backoff := 250 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		listed, err := adm.ListEndOffsets(ctx, c.bc.topic)
		cancel()
		if err == nil {
			err = listed.Error()
		}
		offsets := map[int32]kgo.Offset{}
		listed.Each(func(o kadm.ListedOffset) { offsets[o.Partition] = kgo.NewOffset().At(o.Offset) })
		if err == nil && len(offsets) == 0 {
			err = errors.New("no partitions")
		}
		if err == nil {
			return offsets, true
		}
		if c.ctx.Err() != nil {
			return nil, false
		}
		c.log.Warn("hot-key cache: cannot list the invalidation topic's partitions; values are not kept until it can (does the topic exist?)",
			"topic", c.bc.topic, "err", err, "retry_in", backoff)
		select {
		case <-c.ctx.Done():
			return nil, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// receive applies one invalidation record.
func (c *Cache) receive(r *kgo.Record) {
	app, key, err := parseRecordKey(r.Key)
	if err != nil {
		c.log.Warn("hot-key cache: skipping an invalidation record it cannot read", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		return
	}
	var v invalidationValue
	if json.Unmarshal(r.Value, &v) == nil && v.Origin == c.bc.origin {
		return
	}
	c.invalidateLocal(app, key)
	c.st.invReceived.Add(1)
}
