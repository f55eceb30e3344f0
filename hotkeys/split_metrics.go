package hotkeys

import "github.com/prometheus/client_golang/prometheus"

// Operations a Splitter counts, by the op label.
const (
	splitOpIncr = iota
	splitOpGet
	splitOpSAdd
	splitOpSRem
	splitOpSMembers
	splitOpZAdd
	splitOpZRem
	splitOpZRange
	splitOps
)

var splitOpNames = [splitOps]string{"incr", "get", "sadd", "srem", "smembers", "zadd", "zrem", "zrange"}

// splitMetrics are a Splitter's metrics. Labels name operations and
// outcomes only, never a key. The operation counts and latencies are read
// from the Splitter's counters (see splitCounters) at scrape time, so a
// call touches no Prometheus metric.
type splitMetrics struct {
	ops          [splitOps][2]prometheus.CounterFunc // [op][split]
	fanout       *splitFanoutCollector
	folds        *prometheus.CounterVec
	foldedShards prometheus.Counter
}

func newSplitMetrics(reg prometheus.Registerer, c *splitCounters) *splitMetrics {
	m := &splitMetrics{
		fanout: &splitFanoutCollector{c: c},
		folds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyheat_hotkeys_split_folds_total",
			Help: "Folds of split keys back into their key, by result (ok, error).",
		}, []string{"result"}),
		foldedShards: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keyheat_hotkeys_split_folded_shards_total",
			Help: "Shards that held something when a fold moved it into their key.",
		}),
	}
	all := []prometheus.Collector{m.fanout, m.folds, m.foldedShards}
	for op := range splitOps {
		for i, split := range [2]string{"false", "true"} {
			read := func() float64 { return float64(c.passed[op].Load()) }
			if i == 1 {
				read = func() float64 { return float64(c.split[op].count()) }
			}
			m.ops[op][i] = prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "keyheat_hotkeys_split_ops_total",
				Help: "Operations through the splitter, by operation and whether the key was split " +
					"(split=\"true\": counted when the call returned) or passed through (counted before its command was sent).",
				ConstLabels: prometheus.Labels{"op": splitOpNames[op], "split": split},
			}, read)
			all = append(all, m.ops[op][i])
		}
	}
	m.folds.WithLabelValues("ok")
	m.folds.WithLabelValues("error")
	if reg != nil {
		reg.MustRegister(all...)
	}
	return m
}

// splitFanoutCollector exports the latencies of the calls on split keys as
// a histogram per operation.
type splitFanoutCollector struct{ c *splitCounters }

var splitFanoutDesc = prometheus.NewDesc("keyheat_hotkeys_split_fanout_seconds",
	"Latency of operations on split keys, by operation, from routing to the result (Redis round trips and merging): "+
		"get, smembers, zrange, srem and zrem touch the key and every shard; incr and sadd one shard; "+
		"zadd a member's home shard and the other places it may be.",
	[]string{"op"}, nil)

func (fc *splitFanoutCollector) Describe(ch chan<- *prometheus.Desc) { ch <- splitFanoutDesc }

func (fc *splitFanoutCollector) Collect(ch chan<- prometheus.Metric) {
	for op := range splitOps {
		l := fc.c.split[op].snapshot()
		buckets := make(map[float64]uint64, len(splitLatencyBounds))
		var cum uint64
		for i, b := range splitLatencyBounds {
			cum += l.Buckets[i].Count
			buckets[b.Seconds()] = cum
		}
		ch <- prometheus.MustNewConstHistogram(splitFanoutDesc, l.Count, l.Total.Seconds(), buckets, splitOpNames[op])
	}
}
