package hotkeys

import "time"

// cacheClock is the cache's time: a monotonic reading in nanoseconds, and
// timers. Values turn stale by a timer (cachedValue.fresh) rather than by
// comparing the clock on each hit: reading the clock costs a hit more than
// the rest of it on a virtual machine whose clock reads are slow, and
// a timer costs one set-up per load instead.
type cacheClock interface {
	nowNs() int64
	// afterFunc calls f in its own goroutine once d has passed, unless
	// the returned stop is called first.
	afterFunc(d time.Duration, f func()) (stop func() bool)
}

// monoClock is the real clock: time since the cache was built, read from
// the monotonic clock.
type monoClock struct{ start time.Time }

func (c monoClock) nowNs() int64 { return int64(time.Since(c.start)) }

func (monoClock) afterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
