package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/topics"
)

// TailOptions are the tailer's settings a config file sets (under
// ingest:, by their mapstructure tags). NewTailer takes a zero value as
// the default (DefaultTailOptions).
type TailOptions struct {
	// TailID names this tail process: its positions are kept under it in
	// the positions topic, and it makes its Kafka transactional id
	// (TransactionalID). Two tail processes must never share one; a second
	// one fences the first, which stops with an error. Empty means the
	// host name.
	TailID string `mapstructure:"tail_id"`
	// PositionsTopic holds the positions, written in the same transaction
	// as the records they account for (positions.go).
	PositionsTopic string `mapstructure:"positions_topic"`
	// Rotated are glob patterns of a followed file's rotated names;
	// {name} stands for its base name, RotatedSuffix ending a pattern for
	// the suffixes logrotate appends (.1, -20261127, .2026-11-27, with
	// .gz and the like), and a relative pattern is looked up in its
	// folder. Files matching them that changed since this tail
	// id first followed the file, and that it has not read, are taken for
	// rotated files that went by (while ingest was down, or between two
	// looks) and read before the live file, oldest first; a copy left by
	// copytruncate is found among them. So they must match only rotated
	// copies of the file, not other logs written beside it. Nil takes the
	// default; a pattern that matches nothing turns the search off.
	Rotated []string `mapstructure:"rotated"`
	// RotatedIdle is how long a rotated file must go without growing,
	// while the file at its path holds data, before it is closed for good
	// (writers keep appending to a renamed file until they reopen).
	RotatedIdle time.Duration `mapstructure:"rotated_idle"`
	// PollInterval is how often a file at its end is checked for growth,
	// rotation and truncation.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// CommitInterval is how often the open transaction commits: lines
	// become visible to read_committed readers and positions advance.
	CommitInterval time.Duration `mapstructure:"commit_interval"`
}

// DefaultTailOptions: the host name as tail id, positions in
// keyheat.ingest.positions, rotated names {name}{rotated} (the names
// logrotate gives, not any name that starts like the file's: see
// RotatedSuffix), a rotated file closed after 5s idle, a 200ms poll, a
// commit every 250ms.
func DefaultTailOptions() TailOptions {
	return TailOptions{PositionsTopic: "keyheat.ingest.positions", Rotated: []string{"{name}" + RotatedSuffix},
		RotatedIdle: 5 * time.Second, PollInterval: 200 * time.Millisecond, CommitInterval: 250 * time.Millisecond}
}

// Validate returns every unusable option, each an *OptionError, joined.
// Zero values are checked as they are, not as NewTailer would fill them.
func (o TailOptions) Validate() error {
	var p optionErrors
	if o.TailID != "" {
		if err := topics.CheckName(o.TailID); err != nil {
			p.add("tail_id", "%v", err)
		}
	}
	if err := topics.CheckName(o.PositionsTopic); err != nil {
		p.add("positions_topic", "%v", err)
	}
	for _, g := range o.Rotated {
		if err := checkRotatedPattern(g); err != nil {
			p.add("rotated", "%v", err)
		}
	}
	if o.RotatedIdle < 0 {
		p.add("rotated_idle", "must not be negative, e.g. 5s")
	}
	if o.PollInterval <= 0 {
		p.add("poll_interval", "must be positive, e.g. 200ms")
	}
	if o.CommitInterval <= 0 {
		p.add("commit_interval", "must be positive, e.g. 250ms")
	}
	return p.err()
}

func (o TailOptions) withDefaults() TailOptions {
	def := DefaultTailOptions()
	if o.PositionsTopic == "" {
		o.PositionsTopic = def.PositionsTopic
	}
	if o.Rotated == nil {
		o.Rotated = def.Rotated
	}
	if o.RotatedIdle == 0 {
		o.RotatedIdle = def.RotatedIdle
	}
	if o.PollInterval == 0 {
		o.PollInterval = def.PollInterval
	}
	if o.CommitInterval == 0 {
		o.CommitInterval = def.CommitInterval
	}
	return o
}

// ID returns the tail id: TailID, or the host name with every character
// a Kafka name may not hold made '-'.
func (o TailOptions) ID() string {
	if o.TailID != "" {
		return o.TailID
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, host)
}

// TransactionalID is the Kafka transactional id of the tail with these
// options: the producer a Tailer is given must use it
// (ProducerConfig.TransactionalID), with PositionsTopic as its
// ProducerConfig.PositionsTopic.
func (o TailOptions) TransactionalID() string { return "keyheat-tail-" + o.ID() }

// TailConfig configures a Tailer: its options and what it runs with.
type TailConfig struct {
	TailOptions
	// Paths are the files to follow, by name, like tail -F.
	Paths []string
	// FromStart reads what a file (and its rotated files) held before
	// this tail id first followed it; by default reading starts at its
	// end. A path with saved positions resumes there, and files created
	// after the start are always read whole.
	FromStart bool
	// StopTimeout bounds the wait for Kafka once Run's ctx ended
	// (DeliveryOptions.StopTimeout); Force, when closed, ends it at once.
	StopTimeout time.Duration
	Force       <-chan struct{}
	// Logger; nil discards.
	Logger *slog.Logger
}

// Tailer follows files into Kafka, exactly once: the lines read between
// two commits and the positions after them go out in one Kafka
// transaction (positions.go), so readers with read_committed isolation
// see every line once, whatever crashes, restarts and rotations happen.
//
// Each path has a goroutine (watch) that reads while holding gate for
// reading; the committer takes it for writing, so between two chunks of
// lines it sees every file's position as of one moment.
type Tailer struct {
	cfg   TailConfig
	pl    *LineSender
	prod  *Producer
	log   *slog.Logger
	id    string
	store *positionStore

	gate    sync.RWMutex
	pending *Stats // the open transaction's counts, added to pl's at commit
	txnErr  atomic.Pointer[error]
	watches []*watch
	forget  []posKey // positions to delete at the next commit

	// gens holds, per device and inode, the first generation no position
	// of this tail id uses: saved ones, and those given out in this run.
	// The watches take keys from it while holding the gate for reading,
	// so it has a lock of its own.
	genMu sync.Mutex
	gens  map[fileID]uint64
}

// NewTailer returns a Tailer for cfg.Paths feeding pl, whose producer
// must be transactional with cfg's TransactionalID.
func NewTailer(cfg TailConfig, pl *LineSender) (*Tailer, error) {
	if len(cfg.Paths) == 0 {
		return nil, errors.New("tail: no files to follow")
	}
	// Absolute paths, in a copy: the caller's slice stays as it was.
	cfg.Paths = slices.Clone(cfg.Paths)
	seen := map[string]bool{}
	for i, p := range cfg.Paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("tail %s: %w", p, err)
		}
		if seen[abs] {
			return nil, fmt.Errorf("tail: %s is named twice", p)
		}
		seen[abs] = true
		cfg.Paths[i] = abs
	}
	cfg.TailOptions = cfg.TailOptions.withDefaults()
	if err := cfg.TailOptions.Validate(); err != nil {
		return nil, fmt.Errorf("tail: %w", err)
	}
	if cfg.StopTimeout < 0 {
		return nil, errors.New("tail: stop timeout must not be negative")
	}
	if pl == nil {
		return nil, errors.New("tail: line sender must be set")
	}
	if got, want := pl.prod.txnID, cfg.TransactionalID(); got != want || pl.prod.positions != cfg.PositionsTopic {
		return nil, fmt.Errorf("tail: the producer must be transactional with id %s and positions topic %s (it has %q and %q)",
			want, cfg.PositionsTopic, got, pl.prod.positions)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Tailer{cfg: cfg, pl: pl, prod: pl.prod, log: cfg.Logger, id: cfg.ID(), pending: NewStats(nil), gens: map[fileID]uint64{}}
	t.store = &positionStore{prod: pl.prod, topic: cfg.PositionsTopic, tailID: t.id, log: t.log, sayEvery: loadSayEvery}
	return t, nil
}

// usedKey records that a position of this tail id has key k.
func (t *Tailer) usedKey(k posKey) {
	t.genMu.Lock()
	defer t.genMu.Unlock()
	id := fileID{Dev: k.Dev, Ino: k.Ino}
	t.gens[id] = max(t.gens[id], k.Gen+1)
}

// newKey returns a key for content at id that no position of this tail id
// has: a file at a device and inode seen before (truncated in place, or
// an inode reused) must not take the key whose saved position still
// answers for the old content, which lives on in a copy or is forgotten
// in the same commit.
func (t *Tailer) newKey(id fileID) posKey {
	t.genMu.Lock()
	defer t.genMu.Unlock()
	k := posKey{Dev: id.Dev, Ino: id.Ino, Gen: t.gens[id]}
	t.gens[id] = k.Gen + 1
	return k
}

// ID returns the tail id the positions are kept under.
func (t *Tailer) ID() string { return t.id }

// Waiting returns the lines read into the open transaction: read, not yet
// delivered.
func (t *Tailer) Waiting() int64 { return t.pending.Lines.Load() }

// Ack implements Acker for the records of the open transaction: the first
// error dooms it.
func (t *Tailer) Ack(_ uint64, err error) {
	if err != nil {
		t.txnErr.CompareAndSwap(nil, &err)
	}
}

// followed returns the followed paths, which are never taken for rotated
// files of another.
func (t *Tailer) followed() map[string]bool {
	m := make(map[string]bool, len(t.cfg.Paths))
	for _, p := range t.cfg.Paths {
		m[p] = true
	}
	return m
}

// loadSayEvery is how often a start that waits for its positions says
// what it waits for.
var loadSayEvery = 10 * time.Second

// errStopped ends a commit that gave up on Kafka because the tail was
// told to stop.
var errStopped = errors.New("stopped while kafka had not taken the open transaction")

// Run follows the files until ctx ends or something fails for good. Then
// it stops reading, commits what it read (waiting for Kafka at most
// StopTimeout, or until Force) and returns: nil when every line read is
// delivered, an *UndeliveredError saying where the next start resumes
// when some are not (they were not, and will be, sent: nothing is lost or
// duplicated either way).
func (t *Tailer) Run(ctx context.Context) error {
	// Open every path before anything talks to Kafka: a start can wait
	// long for it, and a file rotated away meanwhile would otherwise never
	// be read on a first start (no position names it). An open file keeps
	// its inode, so this pins the files as they were when ingest started.
	startMs := time.Now().UnixMilli()
	pinned := make([]pin, len(t.cfg.Paths))
	for i, p := range t.cfg.Paths {
		if f, err := os.Open(p); err == nil {
			pinned[i].f = f
			if fi, err := f.Stat(); err == nil {
				pinned[i].size = fi.Size()
			}
		}
	}
	// Nothing is read before the positions are loaded, so a stop meanwhile
	// ends the wait at once.
	saved, err := t.store.load(ctx)
	if err != nil {
		for _, p := range pinned {
			if p.f != nil {
				_ = p.f.Close()
			}
		}
		if ctx.Err() != nil {
			return nil // stopped before anything was read
		}
		return fmt.Errorf("tail: load positions from %s: %w", t.cfg.PositionsTopic, err)
	}
	for k := range saved {
		t.usedKey(k)
	}
	giveUp, cancelGiveUp := giveUpContext(ctx, t.cfg.StopTimeout, t.cfg.Force)
	defer cancelGiveUp()
	t.startWatches(pinned, startMs, saved)
	defer func() {
		t.gate.Lock()
		defer t.gate.Unlock()
		for _, w := range t.watches {
			for _, tf := range w.files {
				tf.close()
			}
		}
	}()
	if err := t.prod.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("tail: begin transaction: %w", err)
	}

	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	var wg sync.WaitGroup
	for _, w := range t.watches {
		wg.Go(func() {
			if err := t.follow(runCtx, giveUp, w); err != nil {
				cancelRun(err)
			}
		})
	}
	commitErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(t.cfg.CommitInterval)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				commitErr <- nil
				return
			case <-tick.C:
			}
			if err := t.commit(giveUp); err != nil {
				cancelRun(err)
				commitErr <- err
				return
			}
		}
	}()
	wg.Wait()
	ferr := <-commitErr
	if cause := context.Cause(runCtx); ferr == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		ferr = cause // a watch failed
	}
	if ferr == nil {
		ferr = t.commit(giveUp) // the last lines read
	}
	if ferr == nil {
		t.log.Info(fmt.Sprintf("tail: stopped; every line read is delivered; the next start resumes at %s", t.resumeAt()))
		return nil
	}
	// Not committed: the open transaction is given up and its lines count
	// as undelivered; the positions stay where the last commit put them.
	actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = abortTxn(actx, t.prod.cl)
	cancel()
	n := t.pending.Lines.Load()
	// They were read: the totals count them as read and undelivered, so
	// that a summary's lines are its delivered plus undelivered ones.
	t.pl.stats.Lines.Add(n)
	t.pl.stats.Bytes.Add(t.pending.Bytes.Load())
	t.pl.stats.Failed.Add(t.pending.Failed.Load())
	t.pl.stats.Undelivered.Add(n)
	t.pending.reset()
	if n == 0 && errors.Is(ferr, errStopped) {
		t.log.Warn("tail: stopped before kafka took the last positions; the next start resumes at " + t.resumeAt())
		return nil
	}
	undelivered := &UndeliveredError{Lines: n, Resume: "the next start resumes at " + t.resumeAt()}
	if errors.Is(ferr, errStopped) {
		return undelivered
	}
	return errors.Join(ferr, undelivered)
}

// follow runs one watch until ctx ends.
func (t *Tailer) follow(ctx, giveUp context.Context, w *watch) error {
	for ctx.Err() == nil {
		t.gate.RLock()
		did, err := w.step(giveUp)
		t.gate.RUnlock()
		if err != nil {
			if giveUp.Err() != nil {
				return nil // gave up on Kafka while sending: the commit says so
			}
			return err
		}
		if did {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(t.cfg.PollInterval):
		}
	}
	return nil
}

// pin is a file opened at the start, before anything talked to Kafka, and
// its size then.
type pin struct {
	f    *os.File
	size int64
}

// startWatches makes a watch per path and decides where each reads from.
func (t *Tailer) startWatches(pinned []pin, startMs int64, saved map[posKey]filePos) {
	t.gate.Lock()
	defer t.gate.Unlock()
	followed := t.followed()
	for i, p := range t.cfg.Paths {
		w := &watch{t: t, path: p, rotated: rotatedPatterns(p, t.cfg.Rotated)}
		var mine []filePos
		for _, pos := range saved {
			if pos.Path == p {
				mine = append(mine, pos)
			}
		}
		slices.SortFunc(mine, func(a, b filePos) int { return strings.Compare(a.Name, b.Name) })
		t.forget = append(t.forget, w.start(pinned[i], startMs, mine, t.cfg.FromStart, followed)...)
		t.watches = append(t.watches, w)
	}
}

// resumeAt says where each followed file's committed position is.
func (t *Tailer) resumeAt() string {
	var parts []string
	for _, w := range t.watches {
		for _, tf := range w.files {
			if tf.tombstone {
				continue
			}
			off := tf.startOff
			if tf.committed.Path != "" {
				off = tf.committed.Offset
			}
			parts = append(parts, fmt.Sprintf("%s byte %d", tf.name, off))
		}
		if len(w.files) == 0 {
			parts = append(parts, w.path+" (not there yet)")
		}
	}
	return strings.Join(parts, ", ")
}

// commit ends the open transaction with the positions of every file that
// moved, and begins the next. Committed, its counts join the totals and
// the files closed for good are let go. When Kafka refuses, it aborts,
// reads the committed positions back and rewinds every file to them, so
// the lines of the aborted transaction are read and sent again; only an
// error no retry can fix (this tail fenced by another with its id, a
// record Kafka will never take) is returned. giveUp bounds every wait for
// Kafka; when it ends the commit returns errStopped.
func (t *Tailer) commit(giveUp context.Context) error {
	t.gate.Lock()
	defer t.gate.Unlock()
	type change struct {
		tf  *tfile
		pos filePos
	}
	var changes []change
	for _, w := range t.watches {
		for _, tf := range w.files {
			if tf.tombstone {
				changes = append(changes, change{tf: tf})
				continue
			}
			tf.refreshFingerprint()
			if p := tf.pos(); tf.committed.Path == "" || !p.sameButSize(tf.committed) {
				changes = append(changes, change{tf, p})
			}
		}
	}
	if len(changes) == 0 && len(t.forget) == 0 && t.pending.Lines.Load() == 0 {
		return nil
	}
	cl := t.prod.cl
	for _, c := range changes {
		var rec *kgo.Record
		if c.tf.tombstone {
			rec = t.store.record(c.tf.key, nil)
		} else {
			rec = t.store.record(c.tf.key, &c.pos)
		}
		cl.Produce(giveUp, rec, func(_ *kgo.Record, err error) { t.Ack(0, err) })
	}
	for _, k := range t.forget {
		cl.Produce(giveUp, t.store.record(k, nil), func(_ *kgo.Record, err error) { t.Ack(0, err) })
	}
	err := cl.Flush(giveUp)
	if err == nil {
		if p := t.txnErr.Load(); p != nil {
			err = *p
		}
	}
	if err == nil {
		err = cl.EndTransaction(giveUp, kgo.TryCommit)
	}
	if err != nil {
		return t.recover(giveUp, err)
	}
	// Committed.
	for _, c := range changes {
		c.tf.committed = c.pos
	}
	t.forget = nil
	t.pending.Delivered.Store(t.pending.Lines.Load())
	t.pl.stats.add(t.pending)
	t.pending.reset()
	for _, w := range t.watches {
		w.files = slices.DeleteFunc(w.files, func(tf *tfile) bool {
			if tf.done || tf.tombstone {
				if tf.fp.n > 0 {
					w.knownFPs = append(w.knownFPs, tf.fp)
				}
				tf.close()
				return true
			}
			return false
		})
	}
	t.txnErr.Store(nil)
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("tail: begin transaction: %w", err)
	}
	return nil
}

// recover handles a commit Kafka did not take; the caller holds the gate.
func (t *Tailer) recover(giveUp context.Context, cause error) error {
	if giveUp.Err() != nil {
		return errStopped
	}
	if fatalTxnErr(cause) {
		return t.fatal(cause)
	}
	t.log.Warn("tail: kafka did not take a transaction; aborting it and reading again from the last committed positions", "err", cause)
	// Until Kafka takes the abort and the read-back, nothing is read: the
	// gate is held. Failures are said once, then once a minute.
	var said time.Time
	retry := func(what string, err error) error {
		if giveUp.Err() != nil {
			return errStopped
		}
		if fatalTxnErr(err) {
			return t.fatal(err)
		}
		if time.Since(said) >= time.Minute {
			said = time.Now()
			t.log.Warn("tail: "+what+" failed; reading waits and retries every second", "err", err)
		}
		select {
		case <-giveUp.Done():
			return errStopped
		case <-time.After(time.Second):
		}
		return nil
	}
	for {
		err := abortTxn(giveUp, t.prod.cl)
		if err == nil {
			break
		}
		if err := retry("abort the transaction", err); err != nil {
			return err
		}
	}
	t.pl.stats.Failed.Add(t.pending.Failed.Load())
	t.pending.reset()
	t.txnErr.Store(nil)
	var saved map[posKey]filePos
	for {
		var err error
		saved, err = t.store.load(giveUp)
		if err == nil {
			break
		}
		if err := retry("reading the committed positions back", err); err != nil {
			return err
		}
	}
	for _, w := range t.watches {
		for _, tf := range w.files {
			if tf.tombstone {
				continue
			}
			p, ok := saved[tf.key]
			tf.rewind(p, ok && p.Path == w.path)
		}
	}
	if err := t.prod.cl.BeginTransaction(); err != nil {
		return t.fatal(err)
	}
	return nil
}

// fatal reports an error no retry fixes, saying what to do.
func (t *Tailer) fatal(err error) error {
	if errors.Is(err, kerr.ProducerFenced) {
		return fmt.Errorf("tail: another ingest tail with tail_id %s (Kafka transactional id %s) started and fenced this one; give each tail process its own ingest.tail_id: %w",
			t.id, t.cfg.TransactionalID(), err)
	}
	return fmt.Errorf("tail: kafka refused the transaction for good: %w", err)
}

// fatalTxnErr reports whether err is one no abort-and-retry can fix.
func fatalTxnErr(err error) bool {
	for _, e := range []error{kerr.ProducerFenced, kerr.TransactionalIDAuthorizationFailed, kerr.TopicAuthorizationFailed,
		kerr.ClusterAuthorizationFailed, kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord,
		kerr.InvalidTopicException, kerr.UnsupportedVersion, kerr.UnsupportedForMessageFormat} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
