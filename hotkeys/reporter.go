package hotkeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/kgolog"
	"github.com/keyheat/keyheat/schemas"
)

// ReporterConfig configures a Reporter. Topic is required; every other
// zero value means the default its field names.
type ReporterConfig struct {
	// ClientOpts connect to the brokers (seed brokers, TLS, SASL). They
	// are applied after the reporter's own producer options, so one given
	// here overrides the reporter's (kgo.ProducerBatchCompression, say).
	// The client sends no client metrics to the brokers (KIP-714), and no
	// option turns them back on: kgo's Close waits up to a second for
	// their final push, which would keep Reporter.Close that long past its
	// ctx when the brokers are unreachable.
	ClientOpts []kgo.Opt
	// Topic receives the events: the events topic detect reads
	// (kafka.topics.events in keyheat's config, keyheat.events there by
	// default).
	Topic string
	// Client is every event's Client field: who is reporting, e.g. the
	// process's host or service instance name. Empty says nothing.
	Client string
	// Node is every event's Node field: the shard or server this process
	// accesses, when one. Empty says nothing.
	Node string
	// FlushInterval is the longest an event waits in a buffer that is not
	// full before it is handed to the producer; default 100ms. Buffers are
	// handed over one after another, so a partition of the topic can get
	// events out of event-time order by about FlushInterval (longer on a
	// starved machine): detect's pipeline.lateness must be well above it
	// (its default of 2s is), or detect counts such events late.
	FlushInterval time.Duration
	// BufferBytes bounds the encoded events the reporter holds, in its
	// buffers and in flight to Kafka, counting each event's record key and
	// value; default 1 MiB. Beyond it Record drops events, and counts
	// them. Each event held also takes some 200 bytes of bookkeeping (its
	// franz-go record), besides franz-go's produce requests.
	BufferBytes int
	// Stripes is how many buffers take events at the same time, rounded
	// down to a power of two; default GOMAXPROCS, fewer if BufferBytes
	// cannot give each stripe buffers that hold an event with the longest
	// key. Each stripe has four buffers of BufferBytes / (4 × stripes).
	Stripes int
	// MaxKeyBytes is the longest key reported; a longer key is dropped and
	// counted, as detect dead-letters it (it is not truncated: two long
	// keys with one prefix would count as one). Default
	// schemas.DefaultMaxKeyBytes; set it to detect's events.max_key_bytes.
	MaxKeyBytes int
	// Logger receives the reporter's warnings (drops, produce errors, at
	// most every few seconds) and franz-go's; nil discards.
	Logger *slog.Logger
	// Registerer receives the reporter's metrics
	// (keyheat_hotkeys_reporter_*); nil registers none. Their names are
	// fixed: give each reporter of a process its own registerer, or one
	// wrapped with a label (prometheus.WrapRegistererWith).
	Registerer prometheus.Registerer
}

// Reporter defaults.
const (
	DefaultReporterFlushInterval = 100 * time.Millisecond
	DefaultReporterBufferBytes   = 1 << 20
)

const (
	// reporterBuffersPerStripe: one buffer takes events while the others
	// wait for Kafka's acknowledgements.
	reporterBuffersPerStripe = 4
	// reporterMaxEventOverhead bounds the bytes of a binary event beyond
	// its strings: magic and version (2), the time (8), three varints and
	// five lengths of at most 10 bytes each (schemas.AppendBinary).
	reporterMaxEventOverhead = 2 + 8 + 8*10
	// reporterMinEventOverhead is the least the same takes: every varint
	// and length one byte.
	reporterMinEventOverhead = 2 + 8 + 8
	// reporterRoomForAppOp is what an event with the longest key leaves
	// for app and op in a buffer at least: an event that does not fit in
	// an empty buffer is dropped as too large.
	reporterRoomForAppOp = 256
	// reporterMaxStripes bounds Stripes.
	reporterMaxStripes = 1 << 12
	// reporterMaxBufferSize bounds one buffer: 1 GiB.
	reporterMaxBufferSize = 1 << 30
	// reporterLogEvery is how often at most the reporter warns.
	reporterLogEvery = 10 * time.Second
)

// Validate returns every unusable field, joined. Zero values are the
// defaults and valid, except Topic.
func (c ReporterConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Topic == "" {
		bad("topic must be set: the events topic detect reads, e.g. keyheat.events")
	}
	if c.FlushInterval < 0 {
		bad("flush interval %s is negative; 0 means %s", c.FlushInterval, DefaultReporterFlushInterval)
	}
	if c.BufferBytes < 0 {
		bad("buffer bytes %d is negative; 0 means %d", c.BufferBytes, DefaultReporterBufferBytes)
	}
	if c.Stripes < 0 || c.Stripes > reporterMaxStripes {
		bad("stripes %d is outside 0..%d; 0 means GOMAXPROCS", c.Stripes, reporterMaxStripes)
	}
	if c.MaxKeyBytes < 0 {
		bad("max key bytes %d is negative; 0 means %d", c.MaxKeyBytes, schemas.DefaultMaxKeyBytes)
	}
	if len(errs) == 0 {
		c = c.withDefaults()
		switch size, need := c.bufferSize(), c.largestEvent(); {
		case size < need:
			bad("buffer bytes %d over %d stripes give buffers of %d bytes, less than the %d an event with a %d-byte key needs: raise buffer bytes or lower stripes",
				c.BufferBytes, c.Stripes, size, need, c.MaxKeyBytes)
		case size > reporterMaxBufferSize: // offsets in a buffer are uint32
			bad("buffer bytes %d over %d stripes give buffers of %d bytes, over %d: lower buffer bytes or raise stripes",
				c.BufferBytes, c.Stripes, size, reporterMaxBufferSize)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("hotkeys reporter: %w", err)
	}
	return nil
}

// withDefaults fills the zero values.
func (c ReporterConfig) withDefaults() ReporterConfig {
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultReporterFlushInterval
	}
	if c.BufferBytes == 0 {
		c.BufferBytes = DefaultReporterBufferBytes
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = schemas.DefaultMaxKeyBytes
	}
	if c.Stripes == 0 {
		c.Stripes = max(1, min(runtime.GOMAXPROCS(0), c.BufferBytes/(reporterBuffersPerStripe*c.largestEvent())))
	}
	return c
}

// bufferSize is the bytes of one buffer.
func (c ReporterConfig) bufferSize() int {
	return c.BufferBytes / (c.Stripes * reporterBuffersPerStripe)
}

// largestEvent is what a buffer must hold at least: an event with the
// longest key (written twice, as record key and in the value) and room
// for app and op.
func (c ReporterConfig) largestEvent() int {
	return 2*c.MaxKeyBytes + reporterRoomForAppOp + c.fixedBytes()
}

// fixedBytes bounds what every event takes besides its key, app and op.
func (c ReporterConfig) fixedBytes() int {
	return reporterMaxEventOverhead + len(c.Client) + len(c.Node)
}

// ReporterStats are a Reporter's counts since it was made. Every Record
// call is counted in Recorded and in exactly one of the others, so that
// Recorded = Sent + Failed + DroppedFull + DroppedInvalid +
// DroppedClosed + Pending in every snapshot. After Close, Pending is 0.
type ReporterStats struct {
	// Recorded counts Record calls.
	Recorded int64
	// Sent counts events Kafka acknowledged.
	Sent int64
	// Failed counts events buffered that Kafka did not acknowledge: it
	// refused them, or Close gave up on them when its context ended. One
	// given up on may still have been written (its request was on the
	// wire), so a reader of the topic finds between Sent and
	// Sent + Failed of the events.
	Failed int64
	// DroppedFull counts events dropped because every buffer was full:
	// Kafka took less than the application reported.
	DroppedFull int64
	// DroppedInvalid counts events the reporter refused before buffering
	// them: an empty key or a key over MaxKeyBytes (which detect refuses
	// too, with its events.max_key_bytes set to MaxKeyBytes), an empty
	// app (the reporter's own rule: detect accepts one), or an app and op
	// that do not fit in a buffer.
	DroppedInvalid int64
	// DroppedClosed counts Record calls after Close.
	DroppedClosed int64
	// Pending counts events held: buffered, or produced and not yet
	// answered by Kafka.
	Pending int64
}

// Why an event was dropped before it was buffered; the label values of
// keyheat_hotkeys_reporter_dropped_total besides full and closed.
const (
	reporterEmptyKey = iota
	reporterEmptyApp
	reporterKeyTooLong
	reporterTooLarge
	reporterInvalidReasons
)

var reporterInvalidNames = [reporterInvalidReasons]string{"empty_key", "empty_app", "key_too_long", "too_large"}

// Reporter sends an application's key accesses to keyheat's events
// topic, for applications that have no access log keyheat could read.
//
// Record encodes each access as one schemas.AccessEvent in the binary
// codec, the record keyed by the access key so that all of a key's
// events land on one partition, as detect needs them. It never blocks on
// Kafka: it writes into one of several fixed-size buffers, which a
// background goroutine hands to an idempotent franz-go producer every
// FlushInterval, or as soon as one fills. When every buffer is full or
// waiting for Kafka (a slow or unreachable broker, more accesses than
// Kafka takes) Record drops the event and counts it; Stats and the
// metrics say how many, and the Logger warns. A Reporter is safe for
// concurrent use.
type Reporter struct {
	topic        string
	client, node string
	maxKey       int
	bufBytes     int // the size of a buffer
	slots        int // the most events a buffer holds
	fixed        int
	interval     time.Duration
	log          *slog.Logger
	// epoch and wallOffNs are Record's clock (nowMs): epoch's monotonic
	// reading, and the Unix time in nanoseconds at that reading's zero,
	// which the flusher renews every interval.
	epoch     time.Time
	wallOffNs atomic.Int64
	cl        *kgo.Client
	stripes   []reporterStripe
	mask      uint32    // len(stripes) - 1, a power of two less one
	hints     sync.Pool // of *reporterHint, see stripeHint
	nextHint  atomic.Uint32

	// free holds the buffers no stripe writes and Kafka does not hold;
	// ready the full buffers for the flusher to produce. Each has room
	// for every buffer, so a send on either never blocks.
	free, ready chan *reporterBuffer
	// inflight counts buffers produced whose records Kafka has not all
	// answered.
	inflight sync.WaitGroup

	invalid [reporterInvalidReasons]atomic.Int64
	closed  atomic.Int64
	sent    atomic.Int64
	failed  atomic.Int64

	errMu   sync.Mutex
	lastErr error // the latest produce error, for the warning

	produceCtx    context.Context // what the flusher's Produce calls wait in
	cancelProduce context.CancelFunc
	quit          chan struct{}
	flusherDone   chan struct{}
	closeOnce     sync.Once
	closeDone     chan struct{} // closed once the first Close returns
	closeErr      error
	// warned is the flusher's, then Close's once the flusher stopped.
	warned reporterWarned
}

// reporterStripe is one buffer taking events, with its lock and counts.
// Padded to two cache lines so that stripes written by different CPUs
// share none (the adjacent-line prefetcher pulls lines in pairs).
type reporterStripe struct {
	mu  sync.Mutex
	buf *reporterBuffer // nil once the reporter closed
	// accepted and full count this stripe's events buffered and dropped
	// for want of a free buffer; read and written under mu.
	accepted, full int64
	_              [128 - 32]byte
}

// reporterBuffer holds encoded events back to back: each event's key
// (the record key) then its binary value. A buffer is written by one
// stripe under its lock, then read by the flusher and franz-go until
// Kafka answered every record, then reset and made free again.
type reporterBuffer struct {
	r     *Reporter
	data  []byte
	slots []reporterSlot
	recs  []kgo.Record // the records produced from slots, kept for reuse
	// pending counts the records produced and not yet answered.
	pending atomic.Int64
	promise func(*kgo.Record, error) // b.done, bound once
}

// reset empties b for reuse.
func (b *reporterBuffer) reset() {
	b.data = b.data[:0]
	b.slots = b.slots[:0]
}

// reporterSlot locates event i in data: its key from the previous slot's
// end (0 for the first) to val, its value from val to end.
type reporterSlot struct{ val, end uint32 }

// NewReporter validates cfg and starts a reporter. It does not contact
// the brokers yet: a broker that cannot be reached shows as events
// Pending, then dropped.
func NewReporter(cfg ReporterConfig) (*Reporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := newReporter(cfg)
	opts := []kgo.Opt{
		kgo.RequiredAcks(kgo.AllISRAcks()), // what the idempotent producer needs; stated for the reader
		// franz-go's own bounds, twice the reporter's: those are what
		// bind, and a buffer freed by its last promise may be produced
		// again before franz-go counted that record out.
		kgo.MaxBufferedRecords(2 * len(r.stripes) * reporterBuffersPerStripe * r.slots),
		kgo.MaxBufferedBytes(2 * cfg.BufferBytes),
		kgo.ProducerLinger(5 * time.Millisecond),
		// kgo's Close waits up to a second for the metrics loop's final
		// push, whatever Close's ctx: with the brokers down, Close
		// returned a second after its ctx ended.
		kgo.DisableClientMetrics(),
	}
	if cfg.Logger != nil {
		opts = append(opts, kgo.WithLogger(kgolog.New(cfg.Logger)))
	}
	cl, err := kgo.NewClient(append(opts, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("hotkeys reporter: kafka client: %w", err)
	}
	r.cl = cl
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(reporterCollector{r}); err != nil {
			cl.Close()
			return nil, fmt.Errorf("hotkeys reporter: register metrics: %w", err)
		}
	}
	go r.flusher()
	return r, nil
}

// newReporter builds a reporter from cfg, validated and with its
// defaults, without its client and flusher.
func newReporter(cfg ReporterConfig) *Reporter {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nstripes := 1 << bits.Len(uint(cfg.Stripes-1)) // a power of two, for the mask
	if nstripes > cfg.Stripes {
		// Buffers were sized for cfg.Stripes; more stripes would exceed
		// BufferBytes, so round down instead.
		nstripes >>= 1
	}
	r := &Reporter{
		topic: cfg.Topic, client: cfg.Client, node: cfg.Node,
		maxKey: cfg.MaxKeyBytes, fixed: cfg.fixedBytes(), interval: cfg.FlushInterval, log: log,
		stripes: make([]reporterStripe, nstripes), mask: uint32(nstripes - 1),
		quit: make(chan struct{}), flusherDone: make(chan struct{}), closeDone: make(chan struct{}),
	}
	r.hints.New = func() any { return &reporterHint{stripe: r.nextHint.Add(1) & r.mask} }
	r.produceCtx, r.cancelProduce = context.WithCancel(context.Background())
	r.epoch = time.Now()
	r.syncClock(r.epoch)
	nbufs := nstripes * reporterBuffersPerStripe
	r.bufBytes = cfg.BufferBytes / nbufs
	// The most events a buffer can hold: each takes at least its 1-byte
	// key twice and a 1-byte app besides the fixed part.
	r.slots = r.bufBytes / (reporterMinEventOverhead + 3 + len(r.client) + len(r.node))
	r.free = make(chan *reporterBuffer, nbufs)
	r.ready = make(chan *reporterBuffer, nbufs)
	for i := range nbufs {
		b := &reporterBuffer{r: r, data: make([]byte, 0, r.bufBytes), slots: make([]reporterSlot, 0, r.slots)}
		b.promise = b.done
		if i < nstripes {
			r.stripes[i].buf = b
		} else {
			r.free <- b
		}
	}
	return r
}

// Record reports one access to key of application app: op is the
// operation (GET, SET, …) and bytes the size of the value or response, 0
// when not known. The event's time is now, in milliseconds. Any bytes
// are a key; a key that is not UTF-8 is read by detect only with
// events.allow_binary_keys.
//
// Record never waits for Kafka: at most for a stripe's lock, which
// Record, Stats and the flusher each hold for a moment (one event's
// encoding, a buffer's swap). It does not allocate, but
// for a few bytes per CPU after garbage collections (stripeHint). It
// drops the event, and counts it in Stats, when key or app is empty, when
// key is longer than MaxKeyBytes, when the event does not fit in an
// empty buffer (app and op of 256 bytes together always fit), when every
// buffer is full, and after Close.
func (r *Reporter) Record(app, key, op string, bytes int64) {
	switch {
	case len(key) == 0:
		r.invalid[reporterEmptyKey].Add(1)
		return
	case len(app) == 0:
		r.invalid[reporterEmptyApp].Add(1)
		return
	case len(key) > r.maxKey:
		r.invalid[reporterKeyTooLong].Add(1)
		return
	}
	need := 2*len(key) + len(app) + len(op) + r.fixed
	if need > r.bufBytes {
		r.invalid[reporterTooLarge].Add(1)
		return
	}
	tsMs := r.nowMs()

	s := r.lockStripe()
	b := s.buf
	if b == nil {
		s.mu.Unlock()
		r.closed.Add(1)
		return
	}
	if cap(b.data)-len(b.data) < need || len(b.slots) == cap(b.slots) {
		if b = r.swap(s); b == nil {
			s.full++
			s.mu.Unlock()
			return
		}
	}
	d := append(b.data, key...)
	val := len(d)
	e := schemas.AccessEvent{TimeMs: tsMs, Key: key, App: app, Op: op, Bytes: bytes, Client: r.client, Node: r.node}
	d = schemas.AppendBinary(d, &e) // need reserved room for it: no allocation
	b.data = d
	b.slots = append(b.slots, reporterSlot{val: uint32(val), end: uint32(len(d))})
	s.accepted++
	s.mu.Unlock()
}

// nowMs is the wall-clock time in Unix milliseconds: time.Now's, for
// about half its cost. time.Now reads the system's clock twice, the wall
// clock and the monotonic one, and one read is the largest part of
// Record's cost where reading is slow (40 to 100 ns on the virtual
// machine Record was measured on). nowMs reads only the monotonic clock,
// time.Since's one read, and adds the wall clock's offset from it as
// syncClock last saw it, at most a second ago: the two differ only by
// adjustments of the wall clock made since (NTP slews it by half a
// millisecond a second at most; a step shows at the next sync).
func (r *Reporter) nowMs() int64 {
	return (r.wallOffNs.Load() + int64(time.Since(r.epoch))) / int64(time.Millisecond)
}

// syncClock renews nowMs's offset from now, a time.Now reading.
func (r *Reporter) syncClock(now time.Time) {
	r.wallOffNs.Store(now.UnixNano() - int64(now.Sub(r.epoch)))
}

// lockStripe returns a stripe, locked: the one stripeHint names, or,
// when that one is busy, the next that is free, or at worst the last
// tried, waited for (a lock held for one event's encoding).
func (r *Reporter) lockStripe() *reporterStripe {
	i := r.stripeHint()
	s := &r.stripes[i]
	if s.mu.TryLock() {
		return s
	}
	for j := uint32(1); j <= r.mask; j++ {
		s = &r.stripes[(i+j)&r.mask]
		if s.mu.TryLock() {
			return s
		}
	}
	s.mu.Lock()
	return s
}

// reporterHint is a stripe index kept in Reporter.hints.
type reporterHint struct{ stripe uint32 }

// stripeHint returns the index of the stripe a caller tries first: the
// same on one CPU (a P, in Go's scheduler) call after call, and different
// on different CPUs, so that a stripe's lock and buffer stay in one CPU's
// cache instead of moving between CPUs on every call. A sync.Pool keeps
// one hint per P and hands a goroutine its P's own; a hint is made, round
// robin over the stripes, when a P has none (its first call, and after
// two garbage collections without calls).
func (r *Reporter) stripeHint() uint32 {
	h := r.hints.Get().(*reporterHint)
	i := h.stripe
	r.hints.Put(h)
	return i
}

// swap replaces s's full buffer with a free one and queues the full one
// for the flusher. It returns the new buffer, or nil when none is free.
// s is locked.
func (r *Reporter) swap(s *reporterStripe) *reporterBuffer {
	select {
	case nb := <-r.free:
		r.ready <- s.buf
		s.buf = nb
		return nb
	default:
		return nil
	}
}

// flusher produces full buffers as they come, and every interval takes
// the buffers that are not empty from the stripes and produces them. It
// ticks at least every second, to sync nowMs's clock and warn.
func (r *Reporter) flusher() {
	defer close(r.flusherDone)
	period := min(r.interval, time.Second)
	tick := time.NewTicker(period)
	defer tick.Stop()
	lastFlush := time.Now()
	for {
		select {
		case <-r.quit:
			return
		default:
		}
		select {
		case <-r.quit:
			return
		case b := <-r.ready:
			r.produce(b)
		case <-tick.C:
			now := time.Now()
			r.syncClock(now)
			// Half a period early, so that an interval that is a whole
			// number of periods is not missed by a tick a moment early.
			if now.Sub(lastFlush) >= r.interval-period/2 {
				lastFlush = now
				for i := range r.stripes {
					if b := r.take(&r.stripes[i], false); b != nil {
						r.produce(b)
					}
				}
			}
			r.warned.warn(r, now, false)
		}
	}
}

// take returns s's buffer when it holds events and a free buffer can
// replace it, or, when closing, always, leaving s closed.
func (r *Reporter) take(s *reporterStripe, closing bool) *reporterBuffer {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buf
	switch {
	case b == nil:
		return nil
	case closing:
		s.buf = nil
	case len(b.slots) == 0:
		return nil
	default:
		select {
		case s.buf = <-r.free:
		default:
			// Every buffer is full or in flight: s keeps its own, which
			// is taken when it fills and one is free, or at a later tick.
			return nil
		}
	}
	if len(b.slots) == 0 {
		r.free <- b
		return nil
	}
	return b
}

// produce hands b's events to franz-go. It returns once franz-go took
// them all, which it may wait for when its own bounds are reached; b
// becomes free again when Kafka answered them all (b.done).
func (r *Reporter) produce(b *reporterBuffer) {
	n := len(b.slots)
	if n == 0 { // no promise would free it
		r.free <- b
		return
	}
	if cap(b.recs) < n {
		// Grown to what the buffer held at most, not to what it could
		// hold: small events need many more records than most buffers
		// ever hold.
		b.recs = make([]kgo.Record, n, min(max(n, 2*cap(b.recs)), cap(b.slots)))
	}
	b.recs = b.recs[:n]
	r.inflight.Add(1)
	b.pending.Store(int64(n))
	start := uint32(0)
	for i, sl := range b.slots {
		// A record's Context is what franz-go fails it with when it ends
		// before the record is sent; the reporter's records never end
		// that way, only when Close gives up and closes the client.
		b.recs[i] = kgo.Record{Topic: r.topic, Context: context.Background(),
			Key: b.data[start:sl.val:sl.val], Value: b.data[sl.val:sl.end:sl.end]}
		start = sl.end
	}
	for i := range b.recs {
		r.cl.Produce(r.produceCtx, &b.recs[i], b.promise)
	}
}

// done is every record's promise; franz-go calls it once per record, from
// one goroutine.
func (b *reporterBuffer) done(_ *kgo.Record, err error) {
	r := b.r
	if err != nil {
		r.failed.Add(1)
		r.errMu.Lock()
		r.lastErr = err
		r.errMu.Unlock()
	} else {
		r.sent.Add(1)
	}
	if b.pending.Add(-1) == 0 {
		// The last record of b: no one reads b's data any more.
		b.reset()
		r.free <- b
		r.inflight.Done()
	}
}

// Stats returns the counts so far. Taken while Record runs, they are
// each a moment's, not all the same moment's.
func (r *Reporter) Stats() ReporterStats {
	st, _ := r.stats()
	return st
}

// stats returns Stats and the invalid drops by reason.
func (r *Reporter) stats() (ReporterStats, [reporterInvalidReasons]int64) {
	// Sent and Failed are read before the stripes' accepted counts: an
	// event is accepted before it can be sent or fail, so Pending, the
	// difference, is never negative.
	st := ReporterStats{Sent: r.sent.Load(), Failed: r.failed.Load()}
	var accepted int64
	for i := range r.stripes {
		s := &r.stripes[i]
		s.mu.Lock()
		accepted += s.accepted
		st.DroppedFull += s.full
		s.mu.Unlock()
	}
	var inv [reporterInvalidReasons]int64
	for i := range inv {
		inv[i] = r.invalid[i].Load()
		st.DroppedInvalid += inv[i]
	}
	st.DroppedClosed = r.closed.Load()
	st.Pending = accepted - st.Sent - st.Failed
	st.Recorded = accepted + st.DroppedFull + st.DroppedInvalid + st.DroppedClosed
	return st, inv
}

// Close stops taking events, produces what the reporter holds and waits
// until Kafka answered every event or ctx ends; then it closes the
// client, which fails the events still unanswered (counted in Failed).
// It returns nil when every event held was acknowledged, and an error
// saying how many were not otherwise. Record calls after Close are
// counted in DroppedClosed. Close is idempotent: a later call returns the
// first one's result once it has one, or ctx's error if its own ctx ends
// first, and cuts the first one's wait short when it does.
func (r *Reporter) Close(ctx context.Context) error {
	first := false
	r.closeOnce.Do(func() { first = true })
	if first {
		r.closeErr = r.close(ctx)
		close(r.closeDone)
		return r.closeErr
	}
	stop := context.AfterFunc(ctx, r.cancelProduce)
	defer stop()
	select {
	case <-r.closeDone:
		return r.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Reporter) close(ctx context.Context) error {
	// Whatever waits for Kafka below (the flusher, or this goroutine in
	// Produce when franz-go's buffer is full) gives up when ctx ends.
	stop := context.AfterFunc(ctx, r.cancelProduce)
	defer stop()
	close(r.quit)
	<-r.flusherDone
	// Every stripe is closed before the ready queue is emptied: a Record
	// queues a buffer only under its stripe's lock with the stripe open,
	// so none can be queued after.
	for i := range r.stripes {
		if b := r.take(&r.stripes[i], true); b != nil {
			r.produce(b)
		}
	}
	for done := false; !done; {
		select {
		case b := <-r.ready:
			r.produce(b)
		default:
			done = true
		}
	}
	flushErr := r.cl.Flush(ctx)
	r.cancelProduce()
	r.cl.Close() // fails what Kafka did not answer yet
	r.inflight.Wait()

	r.warned.warn(r, time.Now(), true)
	st := r.Stats()
	if st.Failed == 0 {
		return nil
	}
	err := fmt.Errorf("hotkeys reporter: %d of %d events buffered were not acknowledged by kafka (refused, or given up on: those may still have been written)", st.Failed, st.Sent+st.Failed)
	if flushErr != nil {
		err = fmt.Errorf("%w (close gave up waiting: %w)", err, flushErr)
	}
	return err
}

// reporterWarned rate-limits the reporter's warnings: it remembers what
// the last one said.
type reporterWarned struct {
	at      time.Time
	full    int64
	invalid [reporterInvalidReasons]int64
	failed  int64
}

// warn logs what was dropped or failed since the last warning, at most
// every reporterLogEvery unless final.
func (w *reporterWarned) warn(r *Reporter, now time.Time, final bool) {
	if !final && now.Sub(w.at) < reporterLogEvery {
		return
	}
	st, inv := r.stats()
	if st.DroppedFull > w.full {
		r.log.Warn("hotkeys reporter: buffers full, events dropped (is Kafka slow or unreachable, or BufferBytes too small?)",
			"dropped", st.DroppedFull-w.full, "dropped_total", st.DroppedFull, "topic", r.topic)
		w.at, w.full = now, st.DroppedFull
	}
	var args []any
	for i, n := range inv {
		if n > w.invalid[i] {
			args = append(args, reporterInvalidNames[i], n-w.invalid[i])
		}
	}
	if len(args) > 0 {
		r.log.Warn("hotkeys reporter: events dropped as invalid (empty key or app, key over max_key_bytes, or app and op too long for a buffer)",
			append(args, "max_key_bytes", r.maxKey)...)
		w.at, w.invalid = now, inv
	}
	if st.Failed > w.failed {
		r.errMu.Lock()
		err := r.lastErr
		r.errMu.Unlock()
		r.log.Warn("hotkeys reporter: events not acknowledged by kafka",
			"failed", st.Failed-w.failed, "failed_total", st.Failed, "topic", r.topic, "err", err)
		w.at, w.failed = now, st.Failed
	}
}
