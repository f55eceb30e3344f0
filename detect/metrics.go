package detect

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyheat/keyheat/schemas"
)

// metrics are the service's Prometheus metrics. Per-partition series are
// labelled topic and partition and deleted when the partition goes.
type metrics struct {
	records      *prometheus.CounterVec // topic, partition
	events       *prometheus.CounterVec // topic, partition
	late         *prometheus.CounterVec // topic, partition
	lag          *prometheus.GaugeVec   // topic, partition
	committed    *prometheus.GaugeVec   // topic, partition
	dlq          *prometheus.CounterVec // reason
	skipped      prometheus.Counter     // lines of raw logs with no keyed access
	dropped      *prometheus.CounterVec // field: optional log fields that did not parse
	keyMismatch  *prometheus.CounterVec // topic: records not keyed by access key on partitions judged keyed
	alerts       *prometheus.CounterVec // type
	alertDelay   prometheus.Histogram   // onset to publish
	windows      prometheus.Counter     // partition windows produced
	reports      prometheus.Counter     // window reports produced
	mergeInvalid prometheus.Counter     // windows records that did not decode
	commits      *prometheus.CounterVec // group, result
	assigned     prometheus.Gauge       // events partitions owned
	merging      prometheus.Gauge       // 1 while this instance is the merger
	reloads      *prometheus.CounterVec // result
	core         *prometheus.CounterVec // counter: pipeline counters summed over partitions
	produceWait  prometheus.Counter     // seconds a partition waited for sink space
	paused       *prometheus.GaugeVec   // topic, partition: fetching paused for backpressure
	rulesLoaded  prometheus.Gauge       // unix seconds of the rules in force
	alignWaits   prometheus.Counter     // times a partition waited for slower ones (aligner)
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	part := []string{"topic", "partition"}
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_records_total",
			Help: "Records read from the events topics, valid or not."}, part),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_events_total",
			Help: "Events handed to detection."}, part),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_late_events_total",
			Help: "Events that arrived after their window closed: in no count, reported in the next window's late field."}, part),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "keyheat_detect_lag_records",
			Help: "Records between the last one read and the partition's high watermark, as of the last fetch."}, part),
		committed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "keyheat_detect_committed_offset",
			Help: "The offset last committed for the partition: a restart re-reads from it."}, part),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_dlq_total",
			Help: "Records dead-lettered (acknowledged by the DLQ topic), by reason."}, []string{"reason"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_detect_skipped_lines_total",
			Help: "Raw log records that record no keyed access (MONITOR's OK, a PING)."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_dropped_fields_total",
			Help: "Optional fields of raw log records that did not parse and were left empty, by field."}, []string{"field"}),
		keyMismatch: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_key_mismatch_total",
			Help: "Records whose Kafka key is not their access key, every one, on partitions found keyed at their first event " +
				"(detect.keyed true, or auto and that record was keyed). With auto the partition is merged as not keyed from the first; " +
				"with true the service stops at the first. Above 0 the topic is not keyed by access key: set detect.keyed: false. " +
				"By topic, kept when partitions move, so that it only grows."}, []string{"topic"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_hotkeys_total",
			Help: "Hot-key events published, by type (hot, update, cooled). A cooled is followed on the registry by the key's tombstone, not counted here."}, []string{"type"}),
		alertDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "keyheat_detect_alert_delay_seconds",
			Help:    "Wall-clock publish time minus event-time onset of hot-key events: the detection delay on live input.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}),
		windows: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_detect_windows_total",
			Help: "Partition window summaries produced to the windows topic."}),
		reports: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_detect_reports_total",
			Help: "Window reports produced by this instance's merger."}),
		mergeInvalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_detect_merge_invalid_total",
			Help: "Records of the windows topic the merger could not use."}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_commits_total",
			Help: "Offset commits, by group (detect, merge) and result."}, []string{"group", "result"}),
		assigned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keyheat_detect_partitions",
			Help: "Events partitions this instance owns."}),
		merging: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keyheat_detect_merger",
			Help: "1 while this instance is the merger (owns the windows topic)."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_rule_reloads_total",
			Help: "Rule reloads from the config file, by result (applied, refused)."}, []string{"result"}),
		core: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_pipeline_total",
			Help: "Detection counters summed over this instance's partitions, by counter."}, []string{"counter"}),
		produceWait: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_detect_sink_wait_seconds_total",
			Help: "Time partitions and the merger waited for a sink's buffer (backpressure)."}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "keyheat_detect_paused",
			Help: "1 while fetching a partition is paused because its worker is behind."}, part),
		rulesLoaded: prometheus.NewGauge(prometheus.GaugeOpts{Name: "keyheat_detect_rules_loaded_timestamp_seconds",
			Help: "When the rules in force were applied."}),
		alignWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_detect_align_waits_total",
			Help: "Times a partition waited because its clock ran more than half of merge.max_pending_windows windows ahead of the slowest partition of the group."}),
	}
	// The series of known label values exist from the start at 0, so a
	// rate() or an alert on them has something to compare with before
	// the first event of their kind.
	for _, r := range schemas.Reasons() {
		m.dlq.WithLabelValues(string(r))
	}
	for _, t := range []string{schemas.HotKeyHot, schemas.HotKeyUpdate, schemas.HotKeyCooled} {
		m.alerts.WithLabelValues(t)
	}
	for _, g := range []string{"detect", "merge"} {
		for _, r := range []string{"ok", "error"} {
			m.commits.WithLabelValues(g, r)
		}
	}
	all := []prometheus.Collector{m.records, m.events, m.late, m.lag, m.committed, m.dlq, m.skipped, m.dropped,
		m.keyMismatch, m.alerts, m.alertDelay, m.windows, m.reports, m.mergeInvalid, m.commits, m.assigned, m.merging,
		m.reloads, m.core, m.produceWait, m.paused, m.rulesLoaded, m.alignWaits}
	if reg != nil {
		for _, c := range all {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// forget deletes a partition's series.
func (m *metrics) forget(topic string, partition int32) {
	l := prometheus.Labels{"topic": topic, "partition": strconv.Itoa(int(partition))}
	for _, v := range []interface{ Delete(prometheus.Labels) bool }{m.records, m.events, m.late, m.lag, m.committed, m.paused} {
		v.Delete(l)
	}
}
