package detect

import (
	"github.com/prometheus/client_golang/prometheus"
)

// unregisterer passes registrations on to a registry and remembers them,
// so everything registered through it can be removed at once: a merger's
// metrics go when this instance stops being the merger, and the next
// election registers the same names again.
type unregisterer struct {
	reg prometheus.Registerer
	cs  []prometheus.Collector
}

func newUnregisterer(reg prometheus.Registerer) *unregisterer { return &unregisterer{reg: reg} }

// or returns u, or nil when there is no registry (so the registering
// package registers nothing, its documented nil case).
func (u *unregisterer) or() prometheus.Registerer {
	if u.reg == nil {
		return nil
	}
	return u
}

func (u *unregisterer) Register(c prometheus.Collector) error {
	if err := u.reg.Register(c); err != nil {
		return err
	}
	u.cs = append(u.cs, c)
	return nil
}

func (u *unregisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := u.Register(c); err != nil {
			panic(err)
		}
	}
}

func (u *unregisterer) Unregister(c prometheus.Collector) bool {
	for i, x := range u.cs {
		if x == c {
			u.cs = append(u.cs[:i], u.cs[i+1:]...)
			break
		}
	}
	return u.reg.Unregister(c)
}

// unregisterAll removes everything registered through u. A nil u does
// nothing.
func (u *unregisterer) unregisterAll() {
	if u == nil {
		return
	}
	for _, c := range u.cs {
		u.reg.Unregister(c)
	}
	u.cs = nil
}
