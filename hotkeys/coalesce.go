package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/keyheat/keyheat/internal/keylog"
)

// flight is one load of a hot key shared by the Gets that missed while it
// ran: the "fetch in progress" placeholder. It is published in its
// keyState (keyState.flight) before load is called, under the table's
// lock; an invalidation of the key, under the same lock, detaches it
// (keyState.flight = nil). When the load returns, its result is stored only
// if the flight is still the keyState's: so a value loaded while an
// invalidation landed is handed to the Gets that waited for it and then
// forgotten.
//
// The sequence that makes a write safe: the writer updates the store, then
// Invalidate takes the table's lock. Either the flight was published before
// that (so Invalidate detaches it, and its possibly old value is not
// stored), or after (so load was called after the write, and reads it).
// Gets that start after Invalidate returns find no flight and start one of
// their own.
//
// A flight ends once (endFlight): when load returns, when it exits without
// returning (runtime.Goexit), or when LoadTimeout passes first, whichever
// comes first. Ending detaches it, so a load that ignores its ctx holds
// the key for LoadTimeout at most: the Gets after that start a load of
// their own, and the stuck load's result, if it ever comes, is dropped.
type flight struct {
	done chan struct{} // closed when data and err are set
	data []byte
	err  error

	// Guarded by table.mu.
	ended   bool  // endFlight ran: data and err are set or being set, done is or will be closed
	store   bool  // keep the result (MitigationLocalCache, and the cache followed invalidations when the load started)
	startNs int64 // when the flight was published: the value is at least this new
	ttl     time.Duration
	waiters int // Gets sharing the load, its starter included
}

// miss serves a Get of a hot key that found no fresh value: it joins the
// key's flight or starts one, and waits.
func (c *Cache) miss(ctx context.Context, e *Entry, h uint64, load func(context.Context) ([]byte, error)) ([]byte, error) {
	t := c.tab
	t.mu.Lock()
	if c.closed.Load() {
		t.mu.Unlock()
		return nil, ErrCacheClosed
	}
	ks := c.keyStateLocked(h, e.App, e.Key)
	if ks == nil {
		// The key alone is larger than MaxBytes: nothing to track it by.
		t.mu.Unlock()
		c.st.coldLoads.Add(1)
		return load(ctx)
	}
	now := c.clock.nowNs()
	cache := e.Mitigation == MitigationLocalCache
	if v := ks.val.Load(); v != nil {
		switch {
		case !cache || now >= v.staleUntilNs:
			t.setValueLocked(ks, nil)
		case v.fresh.Load():
			// A load stored it since Get looked.
			t.mu.Unlock()
			ks.hits.add()
			return v.data, nil
		}
	}
	if cache {
		ks.counters.misses.Add(1)
		c.st.misses.Add(1)
	}
	fl := ks.flight
	if fl != nil {
		fl.waiters++
		ks.counters.coalesced.Add(1)
		c.st.coalesced.Add(1)
		t.mu.Unlock()
		return c.wait(ctx, ks, fl)
	}
	ttl := c.localTTL
	if e.LocalTTL > 0 {
		ttl = e.LocalTTL
	}
	fl = &flight{
		done:    make(chan struct{}),
		store:   cache && c.following.Load(),
		startNs: now,
		ttl:     ttl,
		waiters: 1,
	}
	ks.flight = fl
	ks.counters.loads.Add(1)
	c.st.loads.Add(1)
	c.wg.Add(1)
	t.mu.Unlock()
	go c.runLoad(context.WithoutCancel(ctx), ks, fl, load)
	return c.wait(ctx, ks, fl)
}

// errLoadExited is what the waiters of a load get when it called
// runtime.Goexit (t.FailNow in a test, say) instead of returning.
var errLoadExited = errors.New("hotkeys: load of a hot key exited without returning (runtime.Goexit)")

// runLoad calls load for fl and ends fl with its result. A timer on the
// cache's clock ends fl after LoadTimeout if load has not returned by then:
// the load's ctx ends at the same time, but a load that ignores it must not
// hold the key, nor Close, for longer.
func (c *Cache) runLoad(vctx context.Context, ks *keyState, fl *flight, load func(context.Context) ([]byte, error)) {
	ctx, cancel := context.WithTimeout(vctx, c.loadTimeout)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	stopTimer := c.clock.afterFunc(c.loadTimeout, func() {
		if c.endFlight(ks, fl, nil, fmt.Errorf("hotkeys: load of app %q key %016x did not return within LoadTimeout (%v); the next Get loads again: %w",
			ks.app, ks.keyHash, c.loadTimeout, context.DeadlineExceeded)) {
			c.log.Warn("hot-key cache: a load did not return within LoadTimeout, even though its ctx ended; its waiters got an error and its result will be dropped",
				"app", ks.app, keylog.Attr(ks.key, c.rawKeys), "load_timeout", c.loadTimeout)
		}
	})
	defer stopTimer()
	returned := false
	defer func() {
		// Reached without returned when load called runtime.Goexit, which
		// recover does not stop: end the flight, or its waiters and the
		// key would wait for it forever.
		if !returned {
			c.endFlight(ks, fl, nil, errLoadExited)
		}
	}()
	data, err := c.callLoad(ctx, ks, load)
	returned = true
	c.endFlight(ks, fl, data, err)
}

// endFlight ends fl with data and err, unless it ended already: it stores
// data when fl is still its keyState's flight and asks to be stored, and
// hands data and err to fl's waiters. It reports whether it ended fl.
func (c *Cache) endFlight(ks *keyState, fl *flight, data []byte, err error) bool {
	t := c.tab
	t.mu.Lock()
	if fl.ended {
		t.mu.Unlock()
		return false
	}
	fl.ended = true
	if ks.flight == fl {
		ks.flight = nil
		if err == nil && fl.store {
			t.setValueLocked(ks, c.newValue(data, fl.startNs, fl.ttl))
		}
	}
	t.mu.Unlock()
	if err != nil {
		c.st.loadErrors.Add(1)
	}
	// Only the call that set ended gets here: data and err are written
	// once, before done is closed, and read only after.
	fl.data, fl.err = data, err
	close(fl.done)
	c.wg.Done()
	return true
}

// newValue returns data as a value loaded from startNs on, fresh for ttl
// from then and kept to be served stale until MaxStaleAge from then.
// Called with tab.mu held.
func (c *Cache) newValue(data []byte, startNs int64, ttl time.Duration) *cachedValue {
	v := &cachedValue{data: data, loadedNs: startNs, staleUntilNs: startNs + max(ttl, c.maxStaleAge).Nanoseconds()}
	if left := time.Duration(startNs + ttl.Nanoseconds() - c.clock.nowNs()); left > 0 {
		v.fresh.Store(true)
		v.stop = c.clock.afterFunc(left, func() { v.fresh.Store(false) })
	}
	return v
}

// callLoad calls load, turning a panic into an error: the load runs in the
// cache's goroutine, where a panic would end the process rather than the
// caller's request.
func (c *Cache) callLoad(ctx context.Context, ks *keyState, load func(context.Context) ([]byte, error)) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("hot key load panicked", "app", ks.app, keylog.Attr(ks.key, c.rawKeys),
				"panic", r, "stack", string(debug.Stack()))
			data, err = nil, fmt.Errorf("hotkeys: load of a hot key panicked: %v", r)
		}
	}()
	return load(ctx)
}

// wait waits for fl, for ctx, or for MaxWait, whichever ends first.
func (c *Cache) wait(ctx context.Context, ks *keyState, fl *flight) ([]byte, error) {
	var timeout <-chan time.Time
	if c.maxWait > 0 {
		tm := time.NewTimer(c.maxWait)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-fl.done:
		return fl.data, fl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timeout:
	}
	// The value held, if any, is one the flight would replace: loaded
	// before it, and not invalidated since (an invalidation drops it).
	if v := ks.val.Load(); v != nil && c.clock.nowNs() < v.staleUntilNs {
		ks.counters.stale.Add(1)
		c.st.stale.Add(1)
		return v.data, nil
	}
	ks.counters.timeouts.Add(1)
	c.st.timeouts.Add(1)
	return nil, fmt.Errorf("%w (%v) for app %q key %016x", ErrWaitTimeout, c.maxWait, ks.app, ks.keyHash)
}
