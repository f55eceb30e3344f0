package pipeline

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// MergerStats are a Merger's running totals. The Merger's goroutine
// writes them; anyone may read them (they are atomics), and NewMerger
// exports them to Prometheus as counter and gauge functions, so there is
// one source of truth.
type MergerStats struct {
	// What became of the summaries given to Add.
	Accepted   atomic.Int64 // held for a window not yet reported
	Empty      atomic.Int64 // no event, no late event: only the partition's progress
	Duplicates atomic.Int64 // same ID as a held summary, same content, or for a window reported with it: dropped
	Conflicts  atomic.Int64 // same ID as a held summary, other content: dropped, the first kept
	Late       atomic.Int64 // for a window this merger reported without its partition: dropped
	Resumed    atomic.Int64 // for a window an earlier run reported (MergerConfig.DoneThroughMs): dropped
	Invalid    atomic.Int64 // refused by Add with an error
	// LateEvents counts the events of the Late summaries: in no report.
	LateEvents atomic.Int64
	// Windows reported, by what released them.
	Complete atomic.Int64 // every expected partition had reported
	Silent   atomic.Int64 // every missing partition was silent
	Capped   atomic.Int64 // MaxPendingWindows was exceeded
	Finished atomic.Int64 // Finish (end of input)
	// Partial counts windows reported with partitions missing, whatever
	// released them.
	Partial atomic.Int64
	// Pending is the number of windows held now.
	Pending atomic.Int64
	// Keys summed over the partitions, per app and window: KeysFolded
	// by apps folded whole, KeysPrunedFolded by apps whose keys unable
	// to reach a report were ruled out first (their listed entries,
	// never placed nor summed, are EntriesPruned). Reports are the same
	// either way.
	KeysFolded, KeysPrunedFolded, EntriesPruned atomic.Int64
}

// register exports s to reg; nil reg registers nothing.
func (s *MergerStats) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	counter := func(name, help string, v *atomic.Int64, labels prometheus.Labels) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "keyheat", Subsystem: "merge", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 { return float64(v.Load()) })
	}
	summaries := func(result string, v *atomic.Int64) prometheus.Collector {
		return counter("summaries_total", "Partition window summaries given to the merger, by what became of them.",
			v, prometheus.Labels{"result": result})
	}
	windows := func(how string, v *atomic.Int64) prometheus.Collector {
		return counter("windows_total", "Windows reported, by what released them.", v, prometheus.Labels{"released_by": how})
	}
	cs := []prometheus.Collector{
		summaries("accepted", &s.Accepted), summaries("empty", &s.Empty), summaries("duplicate", &s.Duplicates),
		summaries("conflict", &s.Conflicts), summaries("late", &s.Late),
		summaries("resumed", &s.Resumed), summaries("invalid", &s.Invalid),
		windows("complete", &s.Complete), windows("silent", &s.Silent),
		windows("cap", &s.Capped), windows("finish", &s.Finished),
		counter("late_events_total", "Events of summaries dropped because their window was already reported without their partition: in no report.",
			&s.LateEvents, nil),
		counter("partial_windows_total", "Windows reported without hearing from every partition.", &s.Partial, nil),
		counter("key_folds_total", "Keys the merger summed over the partitions, per app and window, by whether keys unable to reach a report were ruled out first.",
			&s.KeysFolded, prometheus.Labels{"pruning": "off"}),
		counter("key_folds_total", "Keys the merger summed over the partitions, per app and window, by whether keys unable to reach a report were ruled out first.",
			&s.KeysPrunedFolded, prometheus.Labels{"pruning": "on"}),
		counter("pruned_entries_total", "Listed entries the merger skipped, their keys ruled out as unable to reach a report.", &s.EntriesPruned, nil),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "keyheat", Subsystem: "merge", Name: "pending_windows",
			Help: "Windows held waiting for partition summaries.",
		}, func() float64 { return float64(s.Pending.Load()) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register merger metrics: %w", err)
		}
	}
	return nil
}
