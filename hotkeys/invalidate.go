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
	"github.com/twmb/franz-go/pkg/kerr"
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
// errors never quote b: a record key holds a raw key, which a log shows
// only when the application asked for raw keys (CacheConfig.LogRawKeys),
// and an error cannot know whether it did.
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
// losing it: the wait doubles while attempts keep failing, and is back at
// its least once a poll went by without a failure.
const (
	refollowMinBackoff = 250 * time.Millisecond
	refollowMaxBackoff = 10 * time.Second
)

// defaultTopicCheckEvery is how often a following cache asks the brokers
// whether its topic is still the one it follows.
const defaultTopicCheckEvery = 5 * time.Second

// follow positions a consumer at the end of every partition of the topic,
// marks the cache following, and evicts on every invalidation read until
// Close. When it loses the topic it stops following and starts over at
// the topic's end (refollow).
//
// Losing the topic is a fetch error, or the topic gone or under another
// ID when follow checks it (every topicCheckEvery). kgo retries what it
// can; an error that reaches follow may have cost records, or means the
// consumer reads no more: a topic deleted and recreated under the same
// name fails with UNKNOWN_TOPIC_ID for good, as kgo never adopts the new
// topic's ID. Depending on when kgo's metadata sees the deletion, it may
// also stop fetching the topic without an error: the check covers that.
func (c *Cache) follow() {
	defer c.wg.Done()
	id, offsets, ok := c.topicStart()
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
	adm := kadm.NewClient(c.bc.cl)
	backoff := refollowMinBackoff
	nextCheck := time.Now().Add(c.topicCheckEvery)
	for {
		pollCtx, cancel := context.WithDeadline(c.ctx, nextCheck)
		fs := cons.PollFetches(pollCtx)
		cancel()
		if c.ctx.Err() != nil {
			return
		}
		fs.EachRecord(c.receive)
		lost := fetchError(fs)
		if lost == nil && !time.Now().Before(nextCheck) {
			lost = c.checkTopic(adm, id)
			nextCheck = time.Now().Add(c.topicCheckEvery)
		}
		if lost == nil {
			backoff = refollowMinBackoff
			continue
		}
		c.log.Warn("hot-key cache: lost the invalidation topic; dropping every cached value and keeping none until it follows the topic again",
			"topic", c.bc.topic, "err", lost, "retry_in", backoff)
		c.stopFollowing()
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, refollowMaxBackoff)
		if id, ok = c.refollow(cons); !ok {
			return
		}
		nextCheck = time.Now().Add(c.topicCheckEvery)
	}
}

// fetchError returns the first error in fs, saying how many partitions
// failed, other than the end of the poll's own ctx; nil when none.
func fetchError(fs kgo.Fetches) error {
	var first error
	n := 0
	fs.EachError(func(_ string, p int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return // the poll's deadline: time to check the topic
		}
		if first == nil {
			first = fmt.Errorf("fetching partition %d failed: %w", p, err)
		}
		n++
	})
	if n > 1 {
		first = fmt.Errorf("%w (and %d more partitions)", first, n-1)
	}
	return first
}

// checkTopic returns an error when the topic is gone or is no longer the
// one with ID id; nil when it is, or when the brokers could not say (a
// fetch error will tell if they stay away).
func (c *Cache) checkTopic(adm *kadm.Client, id kadm.TopicID) error {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	topics, err := adm.ListTopics(ctx, c.bc.topic)
	if err != nil {
		c.log.Debug("hot-key cache: cannot check the invalidation topic", "topic", c.bc.topic, "err", err)
		return nil
	}
	d, ok := topics[c.bc.topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return errors.New("the topic is gone")
	case d.Err != nil:
		c.log.Debug("hot-key cache: cannot check the invalidation topic", "topic", c.bc.topic, "err", d.Err)
		return nil
	case d.ID != id:
		return fmt.Errorf("the topic was recreated: its ID is %s, was %s", d.ID, id)
	}
	return nil
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
// and returns the topic's ID, or false when the cache closed meanwhile.
func (c *Cache) refollow(cons *kgo.Client) (kadm.TopicID, bool) {
	// The producer too: kgo fails every record produced to a recreated
	// topic until it is purged.
	c.bc.cl.PurgeTopicsFromClient(c.bc.topic)
	cons.PurgeTopicsFromClient(c.bc.topic)
	id, offsets, ok := c.topicStart()
	if !ok {
		return id, false
	}
	cons.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.bc.topic: offsets})
	c.setFollowing(true)
	c.log.Info("hot-key cache follows invalidations again", "topic", c.bc.topic, "partitions", len(offsets))
	return id, true
}

// topicStart returns the topic's ID and the end offset of each of its
// partitions, retrying until it has them or the cache closes. The ID is
// read first: if the topic is recreated in between, the ID is the old
// one, and the next check finds it changed.
func (c *Cache) topicStart() (kadm.TopicID, map[int32]kgo.Offset, bool) {
	adm := kadm.NewClient(c.bc.cl)
	backoff := refollowMinBackoff
	for {
		ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
		var id kadm.TopicID
		topics, err := adm.ListTopics(ctx, c.bc.topic)
		if err == nil {
			err = topics.Error()
			id = topics[c.bc.topic].ID
		}
		var listed kadm.ListedOffsets
		if err == nil {
			listed, err = adm.ListEndOffsets(ctx, c.bc.topic)
		}
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
			return id, offsets, true
		}
		if c.ctx.Err() != nil {
			return id, nil, false
		}
		c.log.Warn("hot-key cache: cannot list the invalidation topic's partitions; values are not kept until it can (does the topic exist?)",
			"topic", c.bc.topic, "err", err, "retry_in", backoff)
		select {
		case <-c.ctx.Done():
			return id, nil, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, refollowMaxBackoff)
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
