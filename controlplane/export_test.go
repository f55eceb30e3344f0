package controlplane

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NewWithClock is New with the server's clock (the created time of the
// entries it publishes, the expires_in it lists) replaced by now.
func NewWithClock(cfg Config, now func() time.Time) (*Server, error) {
	return newServer(cfg, now)
}

// RecordsCounter is the feed's counter of topic's records with result.
func (f *Feed) RecordsCounter(topic, result string) prometheus.Counter {
	return f.records.WithLabelValues(topic, result)
}
