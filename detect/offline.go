package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// EventSource yields archived events in event-time order, as
// parquet.EventReader does: Read fills dst and returns how many rows it
// filled, and io.EOF after the last.
type EventSource interface {
	Read(dst []schemas.EventRow) (int, error)
}

// ReplaySink receives what a replay produces, in the order the live
// service would publish it: a partition's hot-key events as its core
// emits them, each merged window's reports as the merger releases them.
// An error stops the replay. A hot-key event's DetectedMs is the event
// time of the event whose processing raised it (live it is the wall
// clock at publication, which a replay cannot know).
type ReplaySink interface {
	HotKey(h *schemas.HotKeyEvent) error
	Report(r *schemas.WindowReport) error
}

// ReplayConfig configures Replay with what the live service ran with.
type ReplayConfig struct {
	// Pipeline configures each partition's core, as detect run's
	// pipeline: section does.
	Pipeline pipeline.Options
	// Merge configures the merger, as detect run's merge: section and the
	// pipeline's window and lateness do. Replay sets its Topics (from
	// Partitions), Threshold and SplitCapacity when unset, and its
	// DoneThroughMs to 0: a replay reports every window it sees.
	Merge pipeline.MergerConfig
	// Partitions are the events topics' partition counts, which the
	// summaries carry and the merger waits for. The live run used the
	// topics' counts; an archive only knows the partitions that archived
	// something (parquet.EventReader.Partitions), which is the same unless
	// a partition had no event at all.
	Partitions map[string]int32
	// Keyed is detect.keyed: auto and true replay partitions as keyed by
	// access key (what ingest writes; the archive does not keep record
	// keys, so auto cannot be decided from them), false as not keyed.
	Keyed string
	// Progress, when set, is called after every batch read with the
	// counts so far.
	Progress func(ReplayStats)
	// Logger; nil discards.
	Logger *slog.Logger
}

// ReplayStats counts what a replay read and produced.
type ReplayStats struct {
	Events  int64
	HotKeys int64
	Reports int64
	// Windows counts the partitions' window summaries.
	Windows int64
}

// replayBatch is the rows read per Read.
const replayBatch = 4096

// replayer runs archived events through the cores and the merger.
type replayer struct {
	cfg   ReplayConfig
	sink  ReplaySink
	log   *slog.Logger
	keyed bool
	cores map[tp]*pipeline.Partition
	// lastTopic's cores by partition: events of one topic need no map
	// lookup, which costs as much as a tenth of a replay.
	lastTopic string
	byPart    []*pipeline.Partition
	merger    *pipeline.Merger
	// cluster decides the hot keys of topics not keyed by access key from
	// the partitions' candidate batches, as the live merger's does.
	cluster *pipeline.ClusterAlerts
	hot     []schemas.HotKeyEvent
	out     pipeline.Output
	ev      schemas.AccessEvent
	buf     []byte
	offset  int64 // the windows topic's offsets, as the merger sees them
	stats   ReplayStats
}

// Replay runs the events src yields through the code live detection runs:
// one pipeline.Partition per topic and partition, fed that partition's
// events with their archived offsets, and a pipeline.Merger fed the
// partitions' window summaries, encoded and decoded as they travel the
// windows topic. At the end of the input every partition ends (as an
// --exit-at-end run's do) and the merger reports what is left. Nothing
// reads the wall clock, so the same archive gives the same output.
//
// The output equals the live run's when each partition's events come in
// the order the partition held them, which an event-time-ordered archive
// gives when every partition's event times never decrease. Where a
// partition's times went backwards, the live run saw the older event
// after the newer one (and may have counted it late); the replay sees it
// in time order.
func Replay(ctx context.Context, src EventSource, cfg ReplayConfig, sink ReplaySink) (ReplayStats, error) {
	r, err := newReplayer(cfg, sink)
	if err != nil {
		return ReplayStats{}, err
	}
	rows := make([]schemas.EventRow, replayBatch)
	for {
		if err := ctx.Err(); err != nil {
			return r.stats, err
		}
		n, rerr := src.Read(rows)
		for i := range rows[:n] {
			if err := r.process(&rows[i]); err != nil {
				return r.stats, err
			}
		}
		r.stats.Events += int64(n)
		if cfg.Progress != nil {
			cfg.Progress(r.stats)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return r.stats, fmt.Errorf("replay: %w", rerr)
		}
	}
	if err := r.end(); err != nil {
		return r.stats, err
	}
	if cfg.Progress != nil {
		cfg.Progress(r.stats)
	}
	return r.stats, nil
}

func newReplayer(cfg ReplayConfig, sink ReplaySink) (*replayer, error) {
	if err := cfg.Pipeline.Validate(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if cfg.Merge.Window != cfg.Pipeline.Window {
		return nil, fmt.Errorf("replay: merger window %v differs from the partitions' %v", cfg.Merge.Window, cfg.Pipeline.Window)
	}
	switch cfg.Keyed {
	case "", KeyedAuto, KeyedTrue, KeyedFalse:
	default:
		return nil, fmt.Errorf("replay: keyed %q: want auto, true or false", cfg.Keyed)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rules, err := pipeline.NewRules(cfg.Pipeline)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	mc := cfg.Merge
	mc.Topics, mc.DoneThroughMs = cfg.Partitions, 0
	if mc.Threshold == nil {
		mc.Threshold = rules.Threshold
	}
	if mc.SplitCapacity == 0 {
		mc.SplitCapacity = cfg.Pipeline.Detect.SplitCapacity
	}
	if mc.Logger == nil {
		mc.Logger = log
	}
	m, err := pipeline.NewMerger(mc)
	if err != nil {
		return nil, fmt.Errorf("replay: merger: %w", err)
	}
	return &replayer{cfg: cfg, sink: sink, log: log, keyed: cfg.Keyed != KeyedFalse,
		cores: map[tp]*pipeline.Partition{}, merger: m,
		cluster: pipeline.NewClusterAlerts(rules, cfg.Pipeline.Detect, clusterHoldMs(mc.MergerOptions, cfg.Pipeline))}, nil
}

// process feeds one archived event to its partition's core and publishes
// what the core emitted, as the live worker does after each record.
func (r *replayer) process(row *schemas.EventRow) error {
	if row.Topic != r.lastTopic || r.byPart == nil {
		r.lastTopic, r.byPart = row.Topic, r.byPart[:0]
		for k, c := range r.cores {
			if k.topic == row.Topic {
				r.byPart = growTo(r.byPart, int(k.partition)+1)
				r.byPart[k.partition] = c
			}
		}
	}
	var core *pipeline.Partition
	if int(row.Partition) < len(r.byPart) {
		core = r.byPart[row.Partition]
	}
	if core == nil {
		k := tp{row.Topic, row.Partition}
		parts := max(r.cfg.Partitions[row.Topic], row.Partition+1)
		src := pipeline.Source{Topic: row.Topic, Partition: row.Partition, Partitions: parts, Keyed: r.keyed}
		var err error
		core, err = pipeline.NewPartition(r.cfg.Pipeline, src, pipeline.Start{Offset: row.Offset})
		if err != nil {
			return fmt.Errorf("replay: partition %s/%d: %w", row.Topic, row.Partition, err)
		}
		r.cores[k] = core
		r.byPart = growTo(r.byPart, int(row.Partition)+1)
		r.byPart[row.Partition] = core
	}
	r.ev = row.Event()
	core.Process(&r.ev, row.Offset, &r.out)
	if len(r.out.Windows)+len(r.out.HotKeys)+len(r.out.Candidates) > 0 {
		return r.emit(core)
	}
	return nil
}

// emit hands the core's hot keys to the sink and its window summaries to
// the merger, then the merger's finished windows to the sink.
func (r *replayer) emit(core *pipeline.Partition) error {
	defer r.out.Reset()
	for i := range r.out.HotKeys {
		h := r.out.HotKeys[i] // a copy the sink may keep
		h.DetectedMs = r.ev.TimeMs
		r.stats.HotKeys++
		if err := r.sink.HotKey(&h); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		core.AckedHotKey(h.ID)
	}
	for i := range r.out.Candidates {
		r.cluster.Add(&r.out.Candidates[i])
		core.AckedCandidates(r.out.Candidates[i].ID)
	}
	if len(r.out.Candidates) > 0 {
		if err := r.clusterHot(r.cluster.Ready(nil, r.hot[:0])); err != nil {
			return err
		}
	}
	for i := range r.out.Windows {
		w := &r.out.Windows[i]
		// The live summary crosses the windows topic in the binary form;
		// so does this one, so the merger sees what it would have seen
		// (keys that are not UTF-8 included).
		r.buf = w.AppendBinary(r.buf[:0])
		dec, err := schemas.DecodePartitionWindow(r.buf)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if err := r.merger.Add(dec, r.offset, 0); err != nil {
			r.log.Warn("window summary not merged", "id", w.ID, "err", err)
		}
		r.offset++
		r.stats.Windows++
		core.Acked(w.StartMs)
	}
	// No partition is ever silent (nil status, as in an --exit-at-end
	// run): windows are reported when complete, or by Finish.
	return r.report(r.merger.Ready(nil))
}

// growTo returns s with at least n elements, new ones nil.
func growTo(s []*pipeline.Partition, n int) []*pipeline.Partition {
	for len(s) < n {
		s = append(s, nil)
	}
	return s
}

func (r *replayer) report(mws []pipeline.MergedWindow) error {
	for _, mw := range mws {
		for i := range mw.Reports {
			r.stats.Reports++
			if err := r.sink.Report(&mw.Reports[i]); err != nil {
				return fmt.Errorf("replay: %w", err)
			}
		}
		r.merger.Acked(mw.StartMs)
	}
	return nil
}

// end closes every partition's windows, by topic and partition, and
// reports what the merger still holds.
func (r *replayer) end() error {
	keys := make([]tp, 0, len(r.cores))
	for k := range r.cores {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tp) int {
		if a.topic != b.topic {
			if a.topic < b.topic {
				return -1
			}
			return 1
		}
		return int(a.partition) - int(b.partition)
	})
	for _, k := range keys {
		core := r.cores[k]
		core.End(&r.out)
		if err := r.emit(core); err != nil {
			return err
		}
	}
	if err := r.clusterHot(r.cluster.Finish(r.hot[:0])); err != nil {
		return err
	}
	return r.report(r.merger.Finish())
}

// clusterHot hands the cluster stage's hot-key events to the sink.
func (r *replayer) clusterHot(evs []schemas.HotKeyEvent) error {
	for i := range evs {
		h := evs[i] // a copy the sink may keep
		h.DetectedMs = r.ev.TimeMs
		r.stats.HotKeys++
		if err := r.sink.HotKey(&h); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	}
	clear(evs)
	r.hot = evs[:0]
	return nil
}
