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
// outcomes only, never a key.
type splitMetrics struct {
	ops          [splitOps][2]prometheus.Counter // [op][split]
	folds        *prometheus.CounterVec
	foldedShards prometheus.Counter
}

func newSplitMetrics(reg prometheus.Registerer) *splitMetrics {
	opsVec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "keyheat_hotkeys_split_ops_total",
		Help: "Operations through the splitter, by operation and whether the key was split (split=\"true\") or passed through.",
	}, []string{"op", "split"})
	m := &splitMetrics{
		folds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyheat_hotkeys_split_folds_total",
			Help: "Folds of split keys back into their key, by result (ok, error).",
		}, []string{"result"}),
		foldedShards: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keyheat_hotkeys_split_folded_shards_total",
			Help: "Shards that held something when a fold moved it into their key.",
		}),
	}
	for op := range splitOps {
		m.ops[op][0] = opsVec.WithLabelValues(splitOpNames[op], "false")
		m.ops[op][1] = opsVec.WithLabelValues(splitOpNames[op], "true")
	}
	m.folds.WithLabelValues("ok")
	m.folds.WithLabelValues("error")
	if reg != nil {
		reg.MustRegister(opsVec, m.folds, m.foldedShards)
	}
	return m
}

func (m *splitMetrics) count(op int, split bool) {
	i := 0
	if split {
		i = 1
	}
	m.ops[op][i].Inc()
}
