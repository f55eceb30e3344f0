package hotkeys

import (
	"sync"
	"time"
)

// FakeClock is a clock a test moves by hand: the follower's TTLs end when
// the test says, not when the machine gets round to it.
type FakeClock struct {
	mu      sync.Mutex
	t       time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	c  chan time.Time
}

// NewFakeClock returns a clock reading t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{t: t} }

// Now is the clock's time.
func (c *FakeClock) Now() time.Time { return c.now() }

// Set moves the clock to t and fires the timers due by then.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.c <- t
			continue
		}
		keep = append(keep, w)
	}
	c.waiters = keep
}

func (c *FakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *FakeClock) at(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.t) {
		ch <- c.t
		return ch, func() {}
	}
	c.waiters = append(c.waiters, fakeWaiter{t, ch})
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, w := range c.waiters {
			if w.c == ch {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				return
			}
		}
	}
}

// NewFollowerWithClock is NewFollower with the follower's wall clock
// replaced by c.
func NewFollowerWithClock(cfg FollowerConfig, c *FakeClock) (*Follower, error) {
	return newFollower(cfg, c)
}
