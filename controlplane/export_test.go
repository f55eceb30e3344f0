package controlplane

import "time"

// NewWithClock is New with the server's clock (the created time of the
// entries it publishes, the expires_in it lists) replaced by now.
func NewWithClock(cfg Config, now func() time.Time) (*Server, error) {
	return newServer(cfg, now)
}
