package hotkeys

import (
	"sync"
	"sync/atomic"

	"github.com/zeebo/xxh3"
)

// Registry is what the cache asks about a key on every Get: whether it is
// hot, and what its entry says (Mitigation, LocalTTL). The registry
// follower implements it; so does StaticRegistry. Get is called on every
// cache hit, so it must be cheap and safe for concurrent use.
type Registry interface {
	Get(app, key string) (Entry, bool)
}

// StaticRegistry is a Registry holding a fixed set of entries that the
// application sets itself: for a process that knows its hot keys, and for
// tests. Reads take no lock; Set and Delete copy the set, so they suit a
// set that changes rarely. The zero value is an empty registry.
type StaticRegistry struct {
	mu sync.Mutex // serializes writers
	m  atomic.Pointer[map[registryKey]Entry]
}

type registryKey struct{ app, key string }

var _ Registry = (*StaticRegistry)(nil)

// Get returns the entry of (app, key) and whether there is one.
func (r *StaticRegistry) Get(app, key string) (Entry, bool) {
	m := r.m.Load()
	if m == nil {
		return Entry{}, false
	}
	e, ok := (*m)[registryKey{app, key}]
	return e, ok
}

// Set adds or replaces the entry of (e.App, e.Key). It stores e with
// Status StatusHot, and with KeyHash computed when e leaves it 0.
func (r *StaticRegistry) Set(e Entry) {
	e.Status = StatusHot
	if e.KeyHash == 0 {
		e.KeyHash = xxh3.HashString(e.Key)
	}
	r.update(func(m map[registryKey]Entry) { m[registryKey{e.App, e.Key}] = e })
}

// Delete removes the entry of (app, key), if any.
func (r *StaticRegistry) Delete(app, key string) {
	r.update(func(m map[registryKey]Entry) { delete(m, registryKey{app, key}) })
}

func (r *StaticRegistry) update(f func(map[registryKey]Entry)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[registryKey]Entry{}
	if old := r.m.Load(); old != nil {
		for k, e := range *old {
			next[k] = e
		}
	}
	f(next)
	r.m.Store(&next)
}
