package hotkeys

import "github.com/prometheus/client_golang/prometheus"

// The reporter's metrics are read from its counts when scraped: Record
// keeps its counts per stripe, and a shared counter incremented on every
// call would be one cache line that every CPU writes.
var (
	reporterRecordedDesc = prometheus.NewDesc("keyheat_hotkeys_reporter_recorded_total",
		"Record calls: every access the application reported.", nil, nil)
	reporterSentDesc = prometheus.NewDesc("keyheat_hotkeys_reporter_sent_total",
		"Events Kafka acknowledged.", nil, nil)
	reporterErrorsDesc = prometheus.NewDesc("keyheat_hotkeys_reporter_produce_errors_total",
		"Events buffered that Kafka did not acknowledge: refused, or given up on at close (those may still have been written).", nil, nil)
	reporterDroppedDesc = prometheus.NewDesc("keyheat_hotkeys_reporter_dropped_total",
		"Events dropped before they were buffered, by reason: full (every buffer full), closed (after Close), "+
			"empty_key, empty_app, key_too_long, too_large (app and op too long for a buffer).", []string{"reason"}, nil)
	reporterPendingDesc = prometheus.NewDesc("keyheat_hotkeys_reporter_pending_events",
		"Events buffered or in flight, not yet answered by Kafka.", nil, nil)
)

// reporterCollector exports a Reporter's counts.
type reporterCollector struct{ r *Reporter }

var _ prometheus.Collector = reporterCollector{}

func (reporterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- reporterRecordedDesc
	ch <- reporterSentDesc
	ch <- reporterErrorsDesc
	ch <- reporterDroppedDesc
	ch <- reporterPendingDesc
}

func (c reporterCollector) Collect(ch chan<- prometheus.Metric) {
	st, inv := c.r.stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(reporterRecordedDesc, st.Recorded)
	counter(reporterSentDesc, st.Sent)
	counter(reporterErrorsDesc, st.Failed)
	counter(reporterDroppedDesc, st.DroppedFull, "full")
	counter(reporterDroppedDesc, st.DroppedClosed, "closed")
	for i, n := range inv {
		counter(reporterDroppedDesc, n, reporterInvalidNames[i])
	}
	ch <- prometheus.MustNewConstMetric(reporterPendingDesc, prometheus.GaugeValue, float64(st.Pending))
}
