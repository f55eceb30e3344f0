package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyheat/keyheat/schemas"
)

// AckFunc learns, once per accepted item, what became of it: nil when all
// of the item's rows are in ClickHouse, so the caller may commit the Kafka
// offsets the item came from; ErrClosed (wrapped) when the writer closed
// before it could write them, so the caller must not commit them. It runs
// on the writer's flushing goroutine, in the order items were accepted:
// keep it short and never call the writer from it.
type AckFunc func(err error)

// ErrClosed is returned by writes to a closed writer, and passed (wrapped)
// to the AckFunc of every item the writer closed without writing.
var ErrClosed = errors.New("clickhouse writer closed")

// Deps are the writer's injected collaborators; nil fields mean none.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Writer writes hot-key events and window reports to ClickHouse in
// batches. Writes wait when MaxBufferedRows rows are held (backpressure),
// inserts are retried with backoff for as long as ClickHouse fails, and
// every item is acknowledged once its rows are in. Every row has a
// deterministic id in a ReplacingMergeTree, so an item written twice (a
// retry of an insert that did reach the server, or an item re-sent after a
// crash) is one logical row.
type Writer struct {
	opts   Options
	conn   driver.Conn
	log    *slog.Logger
	m      *metrics
	tables []*table

	// baseCtx parents every insert; Close cancels it when its deadline
	// passes, so a hung insert does not hold Close.
	baseCtx    context.Context
	cancelBase context.CancelFunc

	mu           sync.Mutex
	queue        []*item // accepted, not yet taken by the flusher
	queuedRows   int
	inflightRows int           // taken by the flusher, not yet acknowledged
	peakRows     int           // largest queuedRows+inflightRows seen, for tests
	space        chan struct{} // closed (and replaced) when rows are released
	closed       bool
	degradedAt   time.Time // zero while inserts succeed
	lastErr      error

	kick    chan struct{} // wakes the flusher: a batch filled, or the queue was empty
	closing chan struct{} // closed by Close: flush everything, then stop
	abort   chan struct{} // closed when Close's ctx ends: stop retrying
	done    chan struct{} // closed when the flusher returns

	closeOnce sync.Once
	closeErr  error
	unwritten int // items acknowledged with ErrClosed; set by the flusher before done
}

// Open connects to ClickHouse, creates the database if it is missing,
// brings its tables up to date (see Migrate) and starts the writer. It
// fails when ClickHouse cannot be reached: a sink that cannot start is
// better reported at once than discovered by a full buffer.
func Open(ctx context.Context, opts Options, deps Deps) (*Writer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := ensureDatabase(ctx, opts); err != nil {
		return nil, err
	}
	conn, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	if _, err := Migrate(ctx, conn, opts.RetentionDays, log); err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	// Registered last, so a failed Open can be retried with the same
	// registry.
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	baseCtx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		opts:       opts,
		conn:       conn,
		log:        log.With("component", "clickhouse"),
		m:          m,
		tables:     tables(),
		baseCtx:    baseCtx,
		cancelBase: cancel,
		space:      make(chan struct{}),
		kick:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		abort:      make(chan struct{}),
		done:       make(chan struct{}),
	}
	m.bufferRowLimit.Set(float64(opts.MaxBufferedRows))
	go w.run()
	return w, nil
}

// WriteHotKey accepts a hot-key event. It waits while the buffer is full,
// until there is room, ctx ends (ctx.Err()) or the writer closes
// (ErrClosed); an error means the event was not accepted and ack will not
// be called. Once accepted, ack is called exactly once. The writer keeps h
// until then: do not modify it.
func (w *Writer) WriteHotKey(ctx context.Context, h *schemas.HotKeyEvent, ack AckFunc) error {
	it, err := newHotItem(h, ack)
	if err != nil {
		return err
	}
	return w.enqueue(ctx, it)
}

// WriteReport accepts a window report: its totals and skew, its key
// lists, partition and node loads, hot slots and advice. It waits and
// acknowledges as WriteHotKey does; a report of more rows than
// MaxBufferedRows is refused, since it could never fit.
func (w *Writer) WriteReport(ctx context.Context, r *schemas.WindowReport, ack AckFunc) error {
	it, err := newReportItem(r, ack)
	if err != nil {
		return err
	}
	return w.enqueue(ctx, it)
}

func (w *Writer) enqueue(ctx context.Context, it *item) error {
	if it.rows > w.opts.MaxBufferedRows {
		return fmt.Errorf("write to clickhouse: the item is %d rows, more than clickhouse.max_buffered_rows (%d); raise it",
			it.rows, w.opts.MaxBufferedRows)
	}
	var waitStart time.Time
	w.mu.Lock()
	for !w.closed && w.queuedRows+w.inflightRows+it.rows > w.opts.MaxBufferedRows {
		space := w.space
		w.mu.Unlock()
		if waitStart.IsZero() {
			waitStart = time.Now()
		}
		select {
		case <-space:
		case <-ctx.Done():
			w.m.waitSeconds.Add(time.Since(waitStart).Seconds())
			return fmt.Errorf("write to clickhouse: buffer full: %w", ctx.Err())
		case <-w.closing:
		}
		w.mu.Lock()
	}
	if !waitStart.IsZero() {
		w.m.waitSeconds.Add(time.Since(waitStart).Seconds())
	}
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	it.at = time.Now()
	w.queue = append(w.queue, it)
	w.queuedRows += it.rows
	held := w.queuedRows + w.inflightRows
	w.peakRows = max(w.peakRows, held)
	wake := len(w.queue) == 1 || w.queuedRows >= w.opts.BatchRows
	w.mu.Unlock()
	w.m.bufferedRows.Set(float64(held))
	if wake {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// Ready returns nil while inserts succeed (or none has been tried), and
// an error saying since when and why while the writer is retrying failed
// inserts, or once it is closed: what a /readyz endpoint reports.
func (w *Writer) Ready() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return ErrClosed
	case !w.degradedAt.IsZero():
		return fmt.Errorf("clickhouse inserts failing since %s, retrying: %w",
			w.degradedAt.UTC().Format(time.RFC3339), w.lastErr)
	}
	return nil
}

// Close stops accepting writes, writes what it holds (retrying while
// ClickHouse fails, until ctx ends), and closes the connection. Items it
// could not write are acknowledged with ErrClosed and counted in the
// returned error. Writes waiting for room return ErrClosed. Close may be
// called more than once; later calls return the first call's result.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		// Why no item is lost between Write and Close: enqueue appends
		// under mu only while closed is false, and the flusher returns
		// only once it sees, under mu, closed set and the queue empty.
		// So every item accepted before this line is written or, if ctx
		// ends first, acknowledged with ErrClosed by giveUp; every later
		// Write returns ErrClosed.
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.closing)
		select {
		case <-w.done:
		case <-ctx.Done():
			close(w.abort)
			w.cancelBase()
			<-w.done
		}
		w.cancelBase()
		var errs []error
		if w.unwritten > 0 {
			errs = append(errs, fmt.Errorf("close clickhouse writer: %d items not written (%w): do not commit their offsets",
				w.unwritten, ctx.Err()))
		}
		if err := w.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close clickhouse connection: %w", err))
		}
		w.closeErr = errors.Join(errs...)
		w.m.ready.Set(0)
	})
	return w.closeErr
}

// run is the flusher: it takes batches off the queue when one is full,
// when its oldest item has waited FlushInterval, or when closing, and
// writes each until it is in or Close gives up.
func (w *Writer) run() {
	defer close(w.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		w.mu.Lock()
		n, closed := w.queuedRows, w.closed
		var oldest time.Time
		if len(w.queue) > 0 {
			oldest = w.queue[0].at
		}
		w.mu.Unlock()
		if n == 0 && closed {
			return
		}
		due := n >= w.opts.BatchRows || (n > 0 && (closed || time.Since(oldest) >= w.opts.FlushInterval))
		if !due {
			if n > 0 {
				timer.Reset(time.Until(oldest.Add(w.opts.FlushInterval)))
			}
			select {
			case <-w.kick:
			case <-timer.C:
			case <-w.closing:
			}
			timer.Stop()
			continue
		}
		batch, rows := w.take()
		if !w.write(batch, rows) {
			w.giveUp(batch, rows)
			return
		}
	}
}

// take moves items worth up to BatchRows rows (at least one item) from
// the queue to the flusher.
func (w *Writer) take() ([]*item, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rows, n := 0, 0
	for n < len(w.queue) && (n == 0 || rows+w.queue[n].rows <= w.opts.BatchRows) {
		rows += w.queue[n].rows
		n++
	}
	batch := make([]*item, n)
	copy(batch, w.queue)
	clear(w.queue[:n])
	w.queue = w.queue[n:]
	w.queuedRows -= rows
	w.inflightRows += rows
	return batch, rows
}

// write inserts batch into every table, retrying with backoff until all
// inserts succeeded (true) or Close gave up (false). A table whose insert
// succeeded is not inserted again within the batch; one whose insert
// failed is inserted again whole, which the tables' ids make harmless even
// if part of it had reached the server.
func (w *Writer) write(batch []*item, rows int) bool {
	done := make([]bool, len(w.tables))
	for attempt := 0; ; attempt++ {
		err := w.insert(batch, done)
		if err == nil {
			break
		}
		w.setDegraded(err)
		wait := backoff(w.opts.RetryMin, w.opts.RetryMax, attempt)
		w.log.Warn("clickhouse insert failed; retrying", "attempt", attempt+1, "wait", wait, "rows", rows, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.abort:
			t.Stop()
			return false
		}
	}
	w.setHealthy()
	for _, it := range batch {
		w.m.items.WithLabelValues(it.kind(), "written").Inc()
		if it.ack != nil {
			it.ack(nil)
		}
	}
	w.release(rows)
	return true
}

// insert inserts batch into every table not done yet. The detail tables
// go in parallel, on connections of their own: each insert costs the
// server a new part, tens of milliseconds however few its rows, and
// those costs overlap. reports goes last, alone, so a report's rows become
// visible together.
func (w *Writer) insert(batch []*item, done []bool) error {
	last := len(w.tables) - 1
	errs := make([]error, last)
	var wg sync.WaitGroup
	for i := range last {
		if !done[i] {
			wg.Go(func() { errs[i] = w.insertInto(i, batch, done) })
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return w.insertInto(last, batch, done)
}

// insertInto inserts batch into table i and marks it done; each call
// touches only done[i].
func (w *Writer) insertInto(i int, batch []*item, done []bool) error {
	t := w.tables[i]
	n := 0
	for _, it := range batch {
		n += t.rows(it)
	}
	if n == 0 {
		done[i] = true
		return nil
	}
	start := time.Now()
	if err := w.insertTable(t, batch); err != nil {
		w.m.insertFailures.WithLabelValues(t.name).Inc()
		return fmt.Errorf("insert %d rows into %s: %w", n, t.name, err)
	}
	w.m.insertSeconds.WithLabelValues(t.name).Observe(time.Since(start).Seconds())
	w.m.rows.WithLabelValues(t.name).Add(float64(n))
	done[i] = true
	return nil
}

func (w *Writer) insertTable(t *table, batch []*item) (err error) {
	ctx, cancel := context.WithTimeout(w.baseCtx, w.opts.InsertTimeout)
	defer cancel()
	b, err := w.conn.PrepareBatch(ctx, t.insertSQL())
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Abort())
		}
	}()
	for _, it := range batch {
		if t.rows(it) == 0 {
			continue
		}
		if err := t.append(b, it); err != nil {
			return err
		}
	}
	return b.Send()
}

// giveUp acknowledges every held item with ErrClosed: the ones of the
// batch Close interrupted and the ones still queued.
func (w *Writer) giveUp(batch []*item, rows int) {
	w.mu.Lock()
	rest := w.queue
	w.queue = nil
	rows += w.queuedRows
	w.queuedRows = 0
	w.mu.Unlock()
	err := fmt.Errorf("clickhouse item not written: %w", ErrClosed)
	for _, it := range append(batch, rest...) {
		w.m.items.WithLabelValues(it.kind(), "unwritten").Inc()
		if it.ack != nil {
			it.ack(err)
		}
		w.unwritten++
	}
	w.release(rows)
}

func (w *Writer) release(rows int) {
	w.mu.Lock()
	w.inflightRows -= rows
	held := w.queuedRows + w.inflightRows
	close(w.space)
	w.space = make(chan struct{})
	w.mu.Unlock()
	w.m.bufferedRows.Set(float64(held))
}

func (w *Writer) setDegraded(err error) {
	w.mu.Lock()
	if w.degradedAt.IsZero() {
		w.degradedAt = time.Now()
	}
	w.lastErr = err
	w.mu.Unlock()
	w.m.ready.Set(0)
}

func (w *Writer) setHealthy() {
	w.mu.Lock()
	since := w.degradedAt
	w.degradedAt, w.lastErr = time.Time{}, nil
	w.mu.Unlock()
	if !since.IsZero() {
		w.log.Info("clickhouse inserts succeed again", "failing_for", time.Since(since).Round(time.Millisecond))
	}
	w.m.ready.Set(1)
}

// backoff is the wait before retry attempt+1: min doubled per attempt,
// capped at max, then jittered uniformly over its upper half, so writers
// that failed together do not retry in step.
func backoff(minWait, maxWait time.Duration, attempt int) time.Duration {
	d := minWait
	for i := 0; i < attempt && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	return d/2 + rand.N(d/2+1)
}

func (it *item) kind() string {
	if it.hot != nil {
		return "hotkey"
	}
	return "report"
}
