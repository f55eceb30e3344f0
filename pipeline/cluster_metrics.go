package pipeline

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Register exports the stage's stats (ClusterStats) to reg as counter
// and gauge functions, keyheat_cluster_*; nil reg registers nothing. A
// second stage on one registry is refused: drop the first's collectors
// first (detect's merger registers on a registry it unregisters when it
// stops merging).
func (c *ClusterAlerts) Register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	s := c.stats
	counter := func(name, help string, v *atomic.Uint64, labels prometheus.Labels) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "keyheat", Subsystem: "cluster", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "keyheat", Subsystem: "cluster", Name: name, Help: help,
		}, f)
	}
	events := func(typ string, v *atomic.Uint64) prometheus.Collector {
		return counter("hotkeys_total", "Hot-key events the cluster stage raised for topics not keyed by access key, by type (hot, update, cooled).",
			v, prometheus.Labels{"type": typ})
	}
	cs := []prometheus.Collector{
		counter("batches_total", "Candidate batches given to the cluster stage.", &s.Batches, nil),
		counter("stale_batches_total", "Candidate batches that came for a slot their partition had sent already, "+
			"or after their round was evaluated without them.", &s.Stale, nil),
		counter("rounds_total", "Cluster rounds (slot ends) evaluated.", &s.Rounds, nil),
		events("hot", &s.Hot), events("update", &s.Updates), events("cooled", &s.Cooled),
		counter("keys_refused_total", "Keys listed by a partition while pipeline.detect.cluster_keys entries were held: "+
			"their counts from that batch were not summed.", &s.KeysRefused, nil),
		gauge("keys", "(rule, app, key) entries the cluster stage holds.", func() float64 { return float64(s.Keys.Load()) }),
		gauge("round_lag_seconds", "Event time from the newest candidate slot end received to the last round evaluated, "+
			"the largest over the topics: how long rounds wait for slower partitions.",
			func() float64 { return float64(s.RoundLagMs.Load()) / 1000 }),
	}
	for _, col := range cs {
		if err := reg.Register(col); err != nil {
			return fmt.Errorf("register cluster metrics: %w", err)
		}
	}
	return nil
}
