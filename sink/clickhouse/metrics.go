package clickhouse

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the writer's Prometheus metrics. With a nil Registerer they
// are still kept, just not exported.
type metrics struct {
	rows           *prometheus.CounterVec
	items          *prometheus.CounterVec
	insertFailures *prometheus.CounterVec
	insertSeconds  *prometheus.HistogramVec
	bufferedRows   prometheus.Gauge
	bufferRowLimit prometheus.Gauge
	waitSeconds    prometheus.Counter
	ready          prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyheat_clickhouse_rows_written_total",
			Help: "Rows inserted into ClickHouse, by table.",
		}, []string{"table"}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyheat_clickhouse_items_total",
			Help: "Hot-key events and window reports acknowledged, by kind and result (written, or unwritten when the writer closed first).",
		}, []string{"kind", "result"}),
		insertFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyheat_clickhouse_insert_failures_total",
			Help: "Inserts that failed and will be retried, by table.",
		}, []string{"table"}),
		insertSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "keyheat_clickhouse_insert_seconds",
			Help:    "Duration of one successful insert, by table.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
		}, []string{"table"}),
		bufferedRows: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "keyheat_clickhouse_buffered_rows",
			Help: "Rows accepted and not yet acknowledged: waiting or being inserted.",
		}),
		bufferRowLimit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "keyheat_clickhouse_buffered_rows_limit",
			Help: "The bound on buffered rows (clickhouse.max_buffered_rows); writes wait beyond it.",
		}),
		waitSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keyheat_clickhouse_write_wait_seconds_total",
			Help: "Time writes spent waiting for buffer space: backpressure while ClickHouse is slow or down.",
		}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "keyheat_clickhouse_ready",
			Help: "1 while inserts succeed, 0 while they are being retried.",
		}),
	}
	m.ready.Set(1)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.rows, m.items, m.insertFailures, m.insertSeconds, m.bufferedRows,
		m.bufferRowLimit, m.waitSeconds, m.ready} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register clickhouse metrics (one writer per registry): %w", err)
		}
	}
	return m, nil
}
