package hotkeys

import (
	"slices"
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
	// m maps a key to its entries, one per app holding the key (most
	// often one): one string to hash per Get instead of two.
	m atomic.Pointer[map[string][]Entry]
}

var _ Registry = (*StaticRegistry)(nil)

// Get returns the entry of (app, key) and whether there is one.
func (r *StaticRegistry) Get(app, key string) (Entry, bool) {
	m := r.m.Load()
	if m == nil {
		return Entry{}, false
	}
	for _, e := range (*m)[key] {
		if e.App == app {
			return e, true
		}
	}
	return Entry{}, false
}

// Set adds or replaces the entry of (e.App, e.Key). It stores e with
// Status StatusHot, and with KeyHash computed when e leaves it 0.
func (r *StaticRegistry) Set(e Entry) {
	e.Status = StatusHot
	if e.KeyHash == 0 {
		e.KeyHash = xxh3.HashString(e.Key)
	}
	r.update(e.App, e.Key, &e)
}

// Delete removes the entry of (app, key), if any.
func (r *StaticRegistry) Delete(app, key string) { r.update(app, key, nil) }

// update replaces (app, key)'s entry by e, or removes it when e is nil,
// in a copy of the set that it then publishes.
func (r *StaticRegistry) update(app, key string, e *Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[string][]Entry{}
	if old := r.m.Load(); old != nil {
		for k, es := range *old {
			next[k] = es
		}
	}
	es := slices.DeleteFunc(slices.Clone(next[key]), func(x Entry) bool { return x.App == app })
	if e != nil {
		es = append(es, *e)
	}
	if len(es) == 0 {
		delete(next, key)
	} else {
		next[key] = es
	}
	r.m.Store(&next)
}
