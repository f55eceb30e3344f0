package archive

import "github.com/prometheus/client_golang/prometheus"

// metrics are the archive writer's counters. They exist (unregistered)
// when no Registerer is given, so the code never checks for nil.
type metrics struct {
	events     prometheus.Counter
	skipped    prometheus.Counter
	rows       *prometheus.CounterVec
	segments   *prometheus.CounterVec
	files      *prometheus.CounterVec
	bytes      *prometheus.CounterVec
	rollErrors prometheus.Counter
	rollTime   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "keyheat", Subsystem: "archive", Name: name, Help: help}
	}
	m := &metrics{
		events:  prometheus.NewCounter(opts("events_total", "Events appended to the archive.")),
		skipped: prometheus.NewCounter(opts("skipped_events_total", "Events appended again after a restart that a durable segment already held, and were not written twice.")),
		rows:    prometheus.NewCounterVec(opts("rows_total", "Rows written into durable archive files, by kind."), []string{"kind"}),
		segments: prometheus.NewCounterVec(opts("segments_total", "Event segments made durable, by what rolled them (size, age, flush, close, boundary, rewrite)."),
			[]string{"reason"}),
		files:      prometheus.NewCounterVec(opts("files_total", "Archive files made durable, by kind."), []string{"kind"}),
		bytes:      prometheus.NewCounterVec(opts("written_bytes_total", "Bytes of archive files made durable, by kind."), []string{"kind"}),
		rollErrors: prometheus.NewCounter(opts("roll_errors_total", "Rolls that failed; their rows stay buffered and the roll is retried.")),
		rollTime: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "keyheat", Subsystem: "archive",
			Name: "roll_seconds", Help: "Time to encode, fsync and publish one segment or record batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
	}
	if reg != nil {
		reg.MustRegister(m.events, m.skipped, m.rows, m.segments, m.files, m.bytes, m.rollErrors, m.rollTime)
	}
	return m
}
