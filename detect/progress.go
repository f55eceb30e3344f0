package detect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/kgolog"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// board follows the progress topic (schemas.Progress): what every detect
// instance of the group says of the events partitions it holds, and of
// itself. It is how the instances keep their partitions aligned with one
// another (the aligner asks it for the partitions held elsewhere) and how
// the merger tells a slow partition, alive and waited for, from a silent
// one, given up on: Kafka is the only coordination.
//
// Silence is measured on this instance's clock, and only up to what the
// board has read: an instance reads its own member records back, and a
// partition is silent when nothing was heard of it for the partition
// timeout before the newest own record read. A board that falls behind
// on the topic (a starved machine, a broker away) therefore declares no
// partition silent that spoke meanwhile; it only waits longer.
type board struct {
	s       *Service
	member  string
	timeout time.Duration
	beat    time.Duration
	cl      *kgo.Client

	mu    sync.Mutex
	parts map[tp]*heard
	// startMs is when the board began following: a partition never heard
	// of is given a full timeout from then.
	startMs int64
	// throughMs is the AtMs of the newest own member record read back:
	// everything sent before it has been read.
	throughMs int64
	// changed is called, without mu, after records changed what the
	// board knows (the aligner's wake-up).
	changed func()

	m boardMetrics
}

// heard is the newest progress record of a partition, and when it was
// read (this instance's wall clock, Unix ms).
type heard struct {
	p       schemas.Progress
	heardMs int64
}

type boardMetrics struct {
	records prometheus.Counter
	invalid prometheus.Counter
	sent    *prometheus.CounterVec
}

// beatEvery is how often a member record goes out, and at least how often
// each partition's: a tenth of the partition timeout, between 100 ms and
// a second.
func beatEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 100*time.Millisecond), time.Second)
}

func newBoard(s *Service) (*board, error) {
	b := &board{s: s, member: memberID(), timeout: s.cfg.PartitionTimeout, beat: beatEvery(s.cfg.PartitionTimeout),
		parts: map[tp]*heard{}}
	b.m = boardMetrics{
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_detect_progress_records_total",
			Help: "Progress records read from the progress topic (every instance's, this one's included)."}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "keyheat_detect_progress_invalid_total",
			Help: "Records of the progress topic that did not decode."}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyheat_detect_progress_sent_total",
			Help: "Progress records this instance sent, by result (ok, error)."}, []string{"result"}),
	}
	if reg := s.cfg.Registerer; reg != nil {
		for _, c := range []prometheus.Collector{b.m.records, b.m.invalid, b.m.sent} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("detect: register metrics: %w", err)
			}
		}
	}
	// Only what was sent within twice the timeout matters: every holder
	// of a partition sends its progress each beat, so an older record is
	// of a partition silent anyway. Starting there, a new instance does
	// not read a long history the compaction has not cleaned yet.
	from := kgo.NewOffset().AfterMilli(s.now().Add(-2 * b.timeout).UnixMilli())
	opts := append([]kgo.Opt{}, s.cfg.ClientOpts...)
	opts = append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topics.Progress: {0: from}}),
		// Records are a few a second; a short wait keeps what the board
		// knows current, and the loop sends its beats between polls.
		kgo.FetchMaxWait(b.beat/2),
		kgo.WithLogger(kgolog.New(s.log, kgolog.WarnAndAbove())),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("detect: kafka progress consumer: %w", err)
	}
	b.cl = cl
	return b, nil
}

// memberID names this instance in progress records: the host name and a
// random suffix, so two instances on one host differ.
func memberID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "detect"
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	return host + "-" + hex.EncodeToString(r[:])
}

// run follows the topic and sends this instance's member records until
// ctx ends.
func (b *board) run(ctx context.Context) {
	defer b.cl.Close()
	b.mu.Lock()
	b.startMs = b.s.now().UnixMilli()
	b.mu.Unlock()
	var lastBeat time.Time
	for ctx.Err() == nil {
		if now := b.s.now(); now.Sub(lastBeat) >= b.beat {
			b.sendBeat(ctx, now)
			lastBeat = now
		}
		pctx, cancel := context.WithTimeout(ctx, b.beat)
		fs := b.cl.PollFetches(pctx)
		cancel()
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				b.s.log.Warn("read progress topic", "topic", t, "err", err)
			}
		})
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			b.add(r)
		})
		if n > 0 && b.changed != nil {
			b.changed()
		}
	}
}

// add takes one record in.
func (b *board) add(r *kgo.Record) {
	b.m.records.Inc()
	if r.Value == nil {
		return // a tombstone
	}
	p, err := schemas.DecodeProgress(r.Value)
	if err != nil {
		b.m.invalid.Inc()
		b.s.log.Debug("progress record not usable", "offset", r.Offset, "err", err)
		return
	}
	if p.Group != b.s.cfg.Group {
		return
	}
	nowMs := b.s.now().UnixMilli()
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.IsMember() {
		if p.Member == b.member {
			b.throughMs = max(b.throughMs, p.AtMs)
		}
		return
	}
	// The newest record wins, whoever sent it. An earlier owner's last
	// record may land after the new owner's first (it stops sending when
	// its partition is revoked, before the new owner starts, but a record
	// in flight may be slower); the new owner's next beat replaces it.
	// Generations cannot order them: they start again at 1 when the
	// group is deleted or expires.
	k := tp{p.Topic, p.Partition}
	h := b.parts[k]
	if h == nil {
		h = &heard{}
		b.parts[k] = h
	}
	h.p, h.heardMs = *p, nowMs
}

// sendBeat sends this instance's member record and, again, the progress
// of every partition it holds as its worker last saw it: a worker held up
// (a full producer, a sink, a fetch that fails) is alive, so its
// partition is waited for, not given up on. Only an instance that stopped
// (or whose board did) falls silent.
func (b *board) sendBeat(ctx context.Context, now time.Time) {
	p := schemas.Progress{Version: schemas.ProgressVersion, Group: b.s.cfg.Group, Member: b.member, AtMs: now.UnixMilli()}
	b.send(ctx, schemas.MemberKey(b.s.cfg.Group, b.member), &p)
	b.s.mu.Lock()
	ws := make([]*partWorker, 0, len(b.s.parts))
	for _, w := range b.s.parts {
		ws = append(ws, w)
	}
	b.s.mu.Unlock()
	for _, w := range ws {
		if snap := w.progSnap.Load(); snap != nil {
			q := *snap
			q.AtMs = now.UnixMilli()
			b.sendPartition(ctx, q)
		}
	}
}

// sendPartition sends a partition's progress record, in the group
// generation this instance is in now.
func (b *board) sendPartition(ctx context.Context, p schemas.Progress) {
	if c := b.s.consumer(); c != nil {
		_, p.Generation = c.GroupMetadata()
	}
	b.send(ctx, schemas.ProgressKey(b.s.cfg.Group, p.Topic, p.Partition), &p)
}

// send produces one progress record. Nothing waits for it: a record lost
// is replaced by the next one, a beat later at most.
func (b *board) send(ctx context.Context, key []byte, p *schemas.Progress) {
	v, err := p.AppendJSON(nil)
	if err != nil {
		b.s.log.Error("progress record", "err", err) // unreachable: plain fields
		return
	}
	b.s.produce(ctx, &kgo.Record{Topic: b.s.cfg.Topics.Progress, Key: key, Value: v}, func(err error) {
		if err != nil {
			b.m.sent.WithLabelValues("error").Inc()
			if ctx.Err() == nil {
				b.s.log.Debug("send progress record", "err", err)
			}
			return
		}
		b.m.sent.WithLabelValues("ok").Inc()
	})
}

// silentLocked reports whether nothing was heard of k for the timeout
// before the newest own record read. b.mu is held.
func (b *board) silentLocked(k tp) bool {
	heardMs := b.startMs
	if h := b.parts[k]; h != nil {
		heardMs = max(heardMs, h.heardMs)
	}
	return b.throughMs-heardMs >= b.timeout.Milliseconds()
}

// status is what the merger knows of a partition besides its summaries
// (pipeline.StatusFunc).
func (b *board) status(topic string, partition int32) pipeline.PartitionStatus {
	k := tp{topic, partition}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.silentLocked(k) {
		return pipeline.PartitionStatus{Silent: true}
	}
	if h := b.parts[k]; h != nil && h.p.State == schemas.ProgressIdle && h.p.NoEvents {
		return pipeline.PartitionStatus{IdleClockMs: h.p.ClockMs}
	}
	return pipeline.PartitionStatus{}
}

// lowest returns the lowest position of the partitions ks, held
// elsewhere, for the aligner: their clock's window, alignFree for one
// that holds nothing back, alignUnknown for one whose events' time is not
// known yet. With idle it returns the lowest clock instead, which idle
// and reading partitions have alike: what idle clocks step along.
func (b *board) lowest(ks []tp, windowOf func(int64) int64, idle bool) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	low := int64(alignFree)
	for _, k := range ks {
		low = min(low, b.positionLocked(k, windowOf, idle))
	}
	return low
}

func (b *board) positionLocked(k tp, windowOf func(int64) int64, idle bool) int64 {
	if b.silentLocked(k) {
		return alignFree // its owner is gone: waiting would stall everyone
	}
	h := b.parts[k]
	switch {
	case h == nil || h.p.State == schemas.ProgressWaiting:
		if idle {
			return alignFree // no clock to step along
		}
		return alignUnknown
	case h.p.State == schemas.ProgressEnded, h.p.NoEvents:
		return alignFree
	case h.p.State == schemas.ProgressIdle && !idle:
		return alignFree
	case !idle && h.p.PositionMs != 0:
		return windowOf(min(h.p.PositionMs, h.p.ClockMs))
	}
	return windowOf(h.p.ClockMs)
}
