package hotkeys

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// followerMetrics are a Follower's Prometheus metrics. No label carries a
// key: the set's size is a gauge per source, nothing per key.
type followerMetrics struct {
	reg          prometheus.Registerer
	all          []prometheus.Collector
	records      prometheus.Counter
	decodeErrors prometheus.Counter
	dropped      prometheus.Counter
	expired      prometheus.Counter
	entries      *prometheus.GaugeVec
	demoted      prometheus.Gauge
	ready        prometheus.Gauge
	lag          prometheus.Gauge
	fetchErrors  prometheus.Counter
	failing      prometheus.Gauge
	resyncs      prometheus.Counter
}

// newFollowerMetrics builds the metrics and registers them with reg (nil:
// none).
func newFollowerMetrics(reg prometheus.Registerer) (*followerMetrics, error) {
	m := &followerMetrics{
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_hotkeys_follower_records_total",
			Help: "Registry records read (transaction markers not counted), including those skipped as undecodable."}),
		decodeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_hotkeys_follower_decode_errors_total",
			Help: "Registry records skipped because they could not be decoded or were inconsistent."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_hotkeys_follower_onchange_dropped_total",
			Help: "Changes not delivered to OnChange callbacks because their queue was full."}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_hotkeys_follower_manual_expired_total",
			Help: "Manual entries (promotes and demotes) whose TTL ended."}),
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "keyheat_hotkeys_follower_entries",
			Help: "Keys the follower says are hot, by who put them there (detector, manual)."}, []string{"source"}),
		demoted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keyheat_hotkeys_follower_demoted",
			Help: "Manual demotes in force (keys hidden from the set whatever the detector says)."}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keyheat_hotkeys_follower_ready",
			Help: "1 once the follower has read the registry up to its end at start."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keyheat_hotkeys_follower_lag_records",
			Help: "Offsets between the follower's position and the partitions' high watermarks, summed, as of the last fetch."}),
		fetchErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_hotkeys_follower_fetch_errors_total",
			Help: "Partition errors the follower's fetches returned."}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keyheat_hotkeys_follower_failing",
			Help: "1 while the latest fetch returned errors or a resync waits for the topic: the set is the last one read."}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_hotkeys_follower_resyncs_total",
			Help: "Times the follower started reading the registry again from its start because the topic was recreated."}),
	}
	m.entries.WithLabelValues(SourceDetector.String())
	m.entries.WithLabelValues(SourceManual.String())
	if reg == nil {
		return m, nil
	}
	m.reg = reg
	for _, c := range []prometheus.Collector{m.records, m.decodeErrors, m.dropped, m.expired, m.entries, m.demoted, m.ready, m.lag, m.fetchErrors, m.failing, m.resyncs} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, fmt.Errorf("register follower metrics: %w", err)
		}
		m.all = append(m.all, c)
	}
	return m, nil
}

// unregister removes the metrics newFollowerMetrics registered, so that a
// new follower can register on the same registry after this one closed.
func (m *followerMetrics) unregister() {
	for _, c := range m.all {
		m.reg.Unregister(c)
	}
	m.all = nil
}
