package hotkeys

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// cacheCounters are a Cache's totals other than hits (which live per key;
// see table.retiredHits).
type cacheCounters struct {
	coldLoads, misses, loads, loadErrors, coalesced, stale, timeouts atomic.Uint64
	invSent, invReceived, purges, followLosses                       atomic.Uint64
}

// CacheStats is a snapshot of a Cache's counters since it was built, and
// of what it holds now.
type CacheStats struct {
	// Hits are Gets of MitigationLocalCache keys served from the cache;
	// Misses those that found no fresh value (and waited for a load).
	Hits, Misses uint64
	// Loads are loads of hot keys (MitigationLocalCache and
	// MitigationCoalesce) the cache started: the upstream calls.
	// Coalesced are Gets of hot keys that joined a load another Get had
	// started instead of starting one. LoadErrors are the loads that
	// returned an error.
	Loads, Coalesced, LoadErrors uint64
	// ColdLoads are Gets that called load themselves: keys not hot, or
	// whose mitigation the cache does not serve.
	ColdLoads uint64
	// StaleServed are Gets that waited MaxWait and got a stale value;
	// Timeouts those that got ErrWaitTimeout.
	StaleServed, Timeouts uint64
	// InvalidationsSent are invalidations Kafka acknowledged;
	// InvalidationsReceived those read from other processes. Purges count
	// the times the cache dropped every value after failing to read
	// invalidations.
	InvalidationsSent, InvalidationsReceived, Purges uint64
	// FollowLosses count the times fetching invalidations failed (the
	// topic deleted, or deleted and recreated; records lost; access
	// denied), so that the cache stopped following the topic: each time
	// it dropped every value (a purge), kept none while not following, and
	// tried to follow the topic again from its end, waiting longer after
	// each failure in a row, up to 10 s.
	FollowLosses uint64
	// Evictions are keys dropped to make room for others.
	Evictions uint64
	// Entries and Bytes are what the cache holds now (see
	// CacheConfig.MaxBytes for what counts as bytes).
	Entries int
	Bytes   int64
	// Following reports that the cache follows invalidations and so keeps
	// values.
	Following bool
	// Keys are the keys the cache holds now, in no particular order.
	Keys []KeyStats
}

// HitRatio is Hits / (Hits + Misses), 0 before any.
func (s CacheStats) HitRatio() float64 { return ratio(s.Hits, s.Hits+s.Misses) }

// CollapseRatio is the Gets that waited for a load per load:
// (Loads + Coalesced) / Loads, 0 before any load. 1 means no miss was
// shared; 1,000 means a thousand concurrent misses made one upstream call.
func (s CacheStats) CollapseRatio() float64 { return ratio(s.Loads+s.Coalesced, s.Loads) }

// KeyStats are one held key's counters since the cache last took it in.
type KeyStats struct {
	App, Key string
	// KeyHash is the xxh3 hash of Key, as Entry.KeyHash.
	KeyHash                              uint64
	Hits, Misses, Loads, Coalesced       uint64
	StaleServed, Timeouts, Invalidations uint64
	// Cached reports that a value is held (fresh or kept to be served
	// stale), and Bytes what the key counts against MaxBytes.
	Cached bool
	Bytes  int64
}

// HitRatio is Hits / (Hits + Misses), 0 before any.
func (s KeyStats) HitRatio() float64 { return ratio(s.Hits, s.Hits+s.Misses) }

// CollapseRatio is (Loads + Coalesced) / Loads, 0 before any load.
func (s KeyStats) CollapseRatio() float64 { return ratio(s.Loads+s.Coalesced, s.Loads) }

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Stats returns a snapshot of the cache's counters and of the keys it
// holds. It takes the cache's write lock for a walk over the held keys:
// call it for a debug page or a report, not per request.
func (c *Cache) Stats() CacheStats {
	return c.totals(true)
}

// totals reads the counters; with keys, the held keys' too.
func (c *Cache) totals(keys bool) CacheStats {
	s := CacheStats{
		Misses:                c.st.misses.Load(),
		Loads:                 c.st.loads.Load(),
		Coalesced:             c.st.coalesced.Load(),
		LoadErrors:            c.st.loadErrors.Load(),
		ColdLoads:             c.st.coldLoads.Load(),
		StaleServed:           c.st.stale.Load(),
		Timeouts:              c.st.timeouts.Load(),
		InvalidationsSent:     c.st.invSent.Load(),
		InvalidationsReceived: c.st.invReceived.Load(),
		Purges:                c.st.purges.Load(),
		FollowLosses:          c.st.followLosses.Load(),
		Following:             c.following.Load(),
	}
	t := c.tab
	t.mu.Lock()
	defer t.mu.Unlock()
	s.Hits = t.retiredHits
	s.Evictions = t.evicted
	s.Entries = t.count
	s.Bytes = t.bytes
	if keys {
		s.Keys = make([]KeyStats, 0, t.count)
	}
	ks := t.hand
	for range t.count {
		h := ks.hits.load()
		s.Hits += h
		if keys {
			s.Keys = append(s.Keys, KeyStats{
				App: ks.app, Key: ks.key, KeyHash: ks.keyHash,
				Hits: h, Misses: ks.counters.misses.Load(), Loads: ks.counters.loads.Load(),
				Coalesced: ks.counters.coalesced.Load(), StaleServed: ks.counters.stale.Load(),
				Timeouts: ks.counters.timeouts.Load(), Invalidations: ks.counters.invalidations.Load(),
				Cached: ks.val.Load() != nil, Bytes: ks.bytes,
			})
		}
		ks = ks.next
	}
	return s
}

// cacheCollector exports a Cache's totals at scrape time, so that a hit
// touches no Prometheus counter. It has no per-key series: hot keys come
// and go within minutes, and a series per key (even by hash) would leave
// a trail of dead series per episode in the metrics store; the registry
// and detect's metrics already say which keys are hot, and Stats gives the
// per-key figures to a debug page.
type cacheCollector struct{ c *Cache }

var (
	cacheDescs = struct {
		hits, misses, loads, coalesced, loadErrors, coldLoads, stale, timeouts,
		invSent, invReceived, purges, followLosses, evictions, entries, bytes, following *prometheus.Desc
	}{
		hits:        desc("hits_total", "Gets of local-cache hot keys served from the process."),
		misses:      desc("misses_total", "Gets of local-cache hot keys that found no fresh value and waited for a load."),
		loads:       desc("loads_total", "Loads of hot keys (local cache and coalesce) the cache started: upstream calls."),
		coalesced:   desc("coalesced_total", "Gets of hot keys that joined a load another Get started; (loads + coalesced) / loads is the collapse ratio."),
		loadErrors:  desc("load_errors_total", "Loads of hot keys that returned an error (every waiter got it)."),
		coldLoads:   desc("cold_loads_total", "Gets that called their load directly: keys not hot, or split."),
		stale:       desc("stale_served_total", "Gets that waited max_wait for a load and got a stale value."),
		timeouts:    desc("wait_timeouts_total", "Gets that waited max_wait for a load and had no stale value to serve."),
		invSent:     desc("invalidations_sent_total", "Invalidations broadcast and acknowledged by Kafka."),
		invReceived: desc("invalidations_received_total", "Invalidations read from other processes."),
		purges:      desc("purges_total", "Times every value was dropped because reading invalidations failed."),
		followLosses: desc("follow_losses_total", "Times fetching invalidations failed (topic deleted or recreated, records lost, access denied): "+
			"the cache stopped keeping values until it followed the topic again from its end."),
		evictions: desc("evictions_total", "Keys evicted to keep within the entry and byte bounds."),
		entries:   desc("entries", "Keys held."),
		bytes:     desc("bytes", "Bytes of keys and values held."),
		following: desc("following", "1 while the cache follows the invalidation topic and so keeps values."),
	}
)

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("keyheat_hotkeys_cache_"+name, help, nil, nil)
}

func (cc *cacheCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(cc, ch) }

func (cc *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	s := cc.c.totals(false)
	d := &cacheDescs
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(d.hits, s.Hits)
	counter(d.misses, s.Misses)
	counter(d.loads, s.Loads)
	counter(d.coalesced, s.Coalesced)
	counter(d.loadErrors, s.LoadErrors)
	counter(d.coldLoads, s.ColdLoads)
	counter(d.stale, s.StaleServed)
	counter(d.timeouts, s.Timeouts)
	counter(d.invSent, s.InvalidationsSent)
	counter(d.invReceived, s.InvalidationsReceived)
	counter(d.purges, s.Purges)
	counter(d.followLosses, s.FollowLosses)
	counter(d.evictions, s.Evictions)
	following := 0.0
	if s.Following {
		following = 1
	}
	ch <- prometheus.MustNewConstMetric(d.entries, prometheus.GaugeValue, float64(s.Entries))
	ch <- prometheus.MustNewConstMetric(d.bytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(d.following, prometheus.GaugeValue, following)
}
