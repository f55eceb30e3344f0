package controlplane

import "time"

// NewClientsWithClock is NewClients with the Clients' clock (the instant
// staleness is judged at, and a record's read time) replaced by now.
func NewClientsWithClock(cfg ClientsConfig, now func() time.Time) (*Clients, error) {
	return newClients(cfg, now)
}
