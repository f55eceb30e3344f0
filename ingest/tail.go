package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// TailOptions are the tailer's settings a config file sets (under
// ingest:, by their mapstructure tags). NewTailer takes a zero value as
// the default (DefaultTailOptions); StateFile's zero value keeps none.
type TailOptions struct {
	// StateFile keeps each path's acknowledged position across restarts;
	// empty keeps none (every start is a first start).
	StateFile string `mapstructure:"state_file"`
	// PollInterval is how often an idle file is checked for growth,
	// rotation and truncation.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// SaveInterval is how often the state file is rewritten while
	// positions advance. A crash loses what was acknowledged since the
	// last save; the restart looks for it on Kafka (readback.go) and does
	// not send what it finds there again.
	SaveInterval time.Duration `mapstructure:"save_interval"`
	// ReadBackMaxRecords caps what a start reads back from the output
	// topics to learn which lines the last run sent past its saved
	// positions; beyond it those lines are sent again (at least once,
	// same keyheat-id) and a warning says so.
	ReadBackMaxRecords int `mapstructure:"readback_max_records"`
}

// DefaultTailOptions: no state file, a 200ms poll, a save every second, a
// read-back of at most 1,000,000 records.
func DefaultTailOptions() TailOptions {
	return TailOptions{PollInterval: 200 * time.Millisecond, SaveInterval: time.Second, ReadBackMaxRecords: 1_000_000}
}

// Validate returns every unusable option, each an *OptionError, joined.
// Zero values are checked as they are, not as NewTailer would fill them.
func (o TailOptions) Validate() error {
	var p optionErrors
	if o.PollInterval <= 0 {
		p.add("poll_interval", "must be positive, e.g. 200ms")
	}
	if o.SaveInterval <= 0 {
		p.add("save_interval", "must be positive, e.g. 1s")
	}
	if o.ReadBackMaxRecords < 1 {
		p.add("readback_max_records", "must be at least 1, e.g. 1000000")
	}
	return p.err()
}

func (o TailOptions) withDefaults() TailOptions {
	def := DefaultTailOptions()
	if o.PollInterval == 0 {
		o.PollInterval = def.PollInterval
	}
	if o.SaveInterval == 0 {
		o.SaveInterval = def.SaveInterval
	}
	if o.ReadBackMaxRecords == 0 {
		o.ReadBackMaxRecords = def.ReadBackMaxRecords
	}
	return o
}

// TailConfig configures a Tailer: its options and what it runs with.
type TailConfig struct {
	TailOptions
	// Paths are the files to follow, by name, like tail -F.
	Paths []string
	// FromStart reads what a file held before ingest first saw it; by
	// default reading starts at its end. Ignored for paths in the state
	// file, and files created after the start are always read whole.
	FromStart bool
	// ReadBackTimeout bounds the read-back at a start; default 30s.
	ReadBackTimeout time.Duration
	// FlushTimeout bounds the final flush at shutdown; default 30s.
	FlushTimeout time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

// Tailer follows files into a LineSender. Each path has its own goroutine
// and its own watermark (tailAcks); a saver goroutine writes the state file.
type Tailer struct {
	cfg        TailConfig
	pl         *LineSender
	log        *slog.Logger
	saveMu     sync.Mutex         // serialises save between the saver and Run's final save
	saved      map[string]filePos // last state written (or loaded); under saveMu after Run starts
	savedBytes []byte             // its encoding, to skip rewriting an unchanged state
	kick       chan struct{}      // asks the saver for a save now

	// Set by readBack (under mu) before the followers start, read-only
	// after.
	topics [numOutTopics]string // output topic names; empty without a state file
	base   floors               // end offsets at the start, minus one
	skips  skipSets             // per path, lines already on Kafka

	mu        sync.Mutex
	followers []*follower
}

// NewTailer returns a Tailer for cfg.Paths feeding pl. It reads the state
// file, so a bad one fails here, before anything talks to Kafka.
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
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = 30 * time.Second
	}
	if cfg.ReadBackTimeout <= 0 {
		cfg.ReadBackTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	saved, err := loadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	return &Tailer{cfg: cfg, pl: pl, log: cfg.Logger, saved: saved, kick: make(chan struct{}, 1)}, nil
}

// Run follows the files until ctx ends or a record fails. Then it stops
// reading, flushes what was produced (at most FlushTimeout), saves the
// acknowledged positions and returns: nil after a clean stop.
func (t *Tailer) Run(ctx context.Context) error {
	// Open every path before anything that talks to Kafka: the read-back
	// can take up to ReadBackTimeout, and a file rotated away meanwhile
	// would otherwise never be read on a first start (no state names it).
	// An open file keeps its inode, so this pins the files as they were
	// when ingest started.
	pinned := make([]*os.File, len(t.cfg.Paths))
	for i, p := range t.cfg.Paths {
		if file, err := os.Open(p); err == nil {
			pinned[i] = file
		}
	}
	if t.cfg.StateFile != "" {
		if err := t.readBack(ctx); err != nil {
			for _, file := range pinned {
				if file != nil {
					_ = file.Close()
				}
			}
			return err
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errs := make([]error, len(t.cfg.Paths))
	for i, p := range t.cfg.Paths {
		f := &follower{t: t, path: p, pinned: pinned[i], acks: newTailAcks(0, t.startFloors(p)), skips: t.skips[p]}
		t.mu.Lock()
		t.followers = append(t.followers, f)
		t.mu.Unlock()
		wg.Go(func() {
			if err := f.run(ctx); err != nil && ctx.Err() == nil {
				errs[i] = err
				cancel(err)
			}
		})
	}
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		tick := time.NewTicker(t.cfg.SaveInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.kick:
				if err := t.save(); err != nil {
					t.log.Error("save tail state", "err", err)
				}
			case <-tick.C:
				if err := t.save(); err != nil {
					t.log.Error("save tail state", "err", err)
				}
			}
		}
	}()
	wg.Wait()
	cancel(nil)
	<-saverDone

	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), t.cfg.FlushTimeout)
	defer fcancel()
	ferr := t.pl.Producer().Flush(fctx)
	if ferr != nil {
		ferr = fmt.Errorf("flush at shutdown: %w", ferr)
	}
	return errors.Join(errors.Join(errs...), ferr, t.save())
}

// startFloors are a path's floors when it starts: the saved ones while
// lines of it past its saved position are on Kafka (the next save must
// still find them), else the end offsets now.
func (t *Tailer) startFloors(path string) floors {
	if len(t.skips[path]) > 0 {
		fl, _ := floorsFromMap(t.saved[path].Floor, t.topics)
		return fl
	}
	return t.base.clone()
}

// positions returns the acknowledged position of every followed path, as
// the state file would record it now.
func (t *Tailer) positions() map[string]filePos {
	t.saveMu.Lock()
	out := maps.Clone(t.saved)
	t.saveMu.Unlock()
	t.mu.Lock()
	fs := append([]*follower(nil), t.followers...)
	topics, base := t.topics, t.base
	t.mu.Unlock()
	// An idle path (nothing outstanding, nothing left to skip) produces
	// its next line after this moment, so any offset acknowledged before
	// it is a floor for it; that keeps a quiet file's floors from holding
	// a restart's read-back far back. The order matters: g is gathered
	// completely before any follower is asked whether it is idle, so
	// every offset in g was acknowledged before that answer.
	g := base.clone()
	for _, f := range fs {
		g.raiseAll(f.floors())
	}
	for _, f := range fs {
		pos, fl, idle, ok := f.position()
		if !ok {
			continue
		}
		if idle {
			fl.raiseAll(g)
		}
		pos.Floor = fl.toMap(topics)
		out[f.path] = pos
	}
	return out
}

func (t *Tailer) save() error {
	if t.cfg.StateFile == "" {
		return nil
	}
	pos := t.positions()
	b, err := marshalState(pos)
	if err != nil {
		return err
	}
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	if bytes.Equal(b, t.savedBytes) {
		return nil
	}
	if err := saveState(t.cfg.StateFile, b); err != nil {
		return err
	}
	t.saved, t.savedBytes = pos, b
	return nil
}

// follower follows one path. Its fields are owned by its goroutine except
// the ones under mu, which position reads.
type follower struct {
	t    *Tailer
	path string
	// pinned is path as Run found it at start, opened before any Kafka
	// round trip; openFirst uses it instead of opening path again.
	pinned *os.File

	f        *os.File
	readPos  int64  // file offset just past the bytes in buf
	buf      []byte // unconsumed bytes are buf[start:end]
	start    int
	end      int
	idPrefix string
	tooLong  int64 // >=0: discarding a too-long line that started here
	prefix   []byte
	// skips are the lines of this path the last run sent past its saved
	// position, per file generation; skip is the set of the open file.
	// Entries go as their lines are passed, sets as their file is left.
	skips   map[fileGen]map[int64]placement
	skip    map[int64]placement
	skipKey fileGen

	mu       sync.Mutex
	open     bool
	id       fileID
	gen      uint64
	acks     *tailAcks
	skipping bool // len(skips) > 0
}

// position returns the acknowledged position with its floors, and
// whether the path is idle: nothing outstanding and nothing to skip, so
// every line it sends from now on is produced after this call.
func (f *follower) position() (pos filePos, fl floors, idle, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.open {
		return filePos{}, fl, false, false
	}
	off, fl, idle := f.acks.snapshot()
	return filePos{ID: f.id, Gen: f.gen, Offset: off}, fl, idle && !f.skipping, true
}

func (f *follower) floors() floors {
	f.mu.Lock()
	acks := f.acks
	f.mu.Unlock()
	return acks.takeFloors()
}

func (f *follower) run(ctx context.Context) error {
	defer func() {
		if f.f != nil {
			_ = f.f.Close()
		}
	}()
	f.buf = make([]byte, max(f.t.pl.MaxLineBytes(), 64<<10)+1)
	f.tooLong = -1
	if err := f.openFirst(ctx); err != nil {
		return err
	}
	// Save at once: a crash before the first periodic save then still
	// finds this start's position and floors, and loses nothing to the
	// file growing while ingest is down.
	select {
	case f.t.kick <- struct{}{}:
	default:
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil
		}
		n, err := f.f.Read(f.buf[f.end:])
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("tail %s: %w", f.path, err)
		}
		if n > 0 {
			f.end += n
			f.readPos += int64(n)
			if err := f.lines(ctx); err != nil {
				return err
			}
			continue
		}
		if _, err := f.acks.Acked(); err != nil && ctx.Err() == nil {
			return fmt.Errorf("tail %s: kafka refused a record: %w", f.path, err)
		}
		switched, err := f.checkRotation(ctx)
		if err != nil || switched {
			if err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.t.cfg.PollInterval):
		}
	}
}

// openFirst opens path where the state file says, or at its end (start
// with FromStart), or, when the file that was at path has been rotated
// away while ingest was down, the rotated file at the saved offset: the
// rotation check then moves on to path once it is drained.
func (f *follower) openFirst(ctx context.Context) error {
	f.t.saveMu.Lock()
	saved, known := f.t.saved[f.path]
	f.t.saveMu.Unlock()
	fromStart := f.t.cfg.FromStart
	file := f.pinned
	f.pinned = nil
	for file == nil {
		var err error
		file, err = os.Open(f.path)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("tail: %w", err)
		}
		// Not there yet: wait, then read it whole (it is new).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.t.cfg.PollInterval):
		}
		known = false
		fromStart = true
	}
	fi, err := file.Stat()
	if err != nil {
		_ = file.Close()
		return fmt.Errorf("tail: %w", err)
	}
	id := fileIDOf(fi)
	var off int64
	gen := uint64(0)
	switch {
	case known && saved.ID == id && fi.Size() >= saved.Offset:
		off, gen = saved.Offset, saved.Gen
	case known && saved.ID == id:
		f.t.log.Warn("file shrank while ingest was down; reading it from the start", "path", f.path)
		gen = saved.Gen + 1
	case known:
		if rotated := findByID(filepath.Dir(f.path), saved.ID); rotated != "" {
			f.t.log.Info("file was rotated while ingest was down; draining the rotated file first", "path", f.path, "rotated", rotated)
			if rf, err := os.Open(rotated); err == nil {
				_ = file.Close()
				file, id, off, gen = rf, saved.ID, saved.Offset, saved.Gen
				break
			}
		}
		f.t.log.Warn("file was replaced while ingest was down and the old one is gone; lines after the saved position in it are lost", "path", f.path)
	case fromStart:
	default:
		off = fi.Size()
	}
	if _, err := file.Seek(off, io.SeekStart); err != nil {
		_ = file.Close()
		return fmt.Errorf("tail %s: %w", f.path, err)
	}
	f.switchTo(file, id, gen, off)
	return nil
}

func (f *follower) switchTo(file *os.File, id fileID, gen uint64, off int64) {
	if f.f != nil && f.f != file {
		_ = f.f.Close()
	}
	f.f, f.readPos, f.start, f.end, f.tooLong = file, off, 0, 0, -1
	f.idPrefix = schemas.RecordID{Kind: schemas.IDTail, Path: f.path, Dev: id.Dev, Ino: id.Ino, FileGen: gen}.Prefix()
	if f.skips != nil {
		fg := fileGen{ID: id, Gen: gen}
		if f.skip != nil && f.skipKey != fg {
			delete(f.skips, f.skipKey) // left for good: its lines are not read again
		}
		f.skip, f.skipKey = f.skips[fg], fg
		if len(f.skips) == 0 {
			f.skips = nil
		}
	}
	// The floors carry over: every line of the file left is acknowledged
	// (waitAcked), so they cover it, and they stay floors for the next.
	f.mu.Lock()
	f.open, f.id, f.gen, f.acks = true, id, gen, newTailAcks(off, f.acks.takeFloors())
	f.skipping = f.skips != nil
	f.mu.Unlock()
}

// dropSkips forgets the skip set of the open file (with others false) or
// those of every other file (with others true).
func (f *follower) dropSkips(others bool) {
	if f.skips == nil {
		return
	}
	if others {
		for fg := range f.skips {
			if fg != f.skipKey {
				delete(f.skips, fg)
			}
		}
	} else {
		delete(f.skips, f.skipKey)
		f.skip = nil
	}
	if len(f.skips) == 0 {
		f.skips, f.skip = nil, nil
	}
	f.mu.Lock()
	f.skipping = f.skips != nil
	f.mu.Unlock()
}

// lines sends every complete line in the buffer.
func (f *follower) lines(ctx context.Context) error {
	for {
		data := f.buf[f.start:f.end]
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		lineStart := f.readPos - int64(f.end-f.start)
		line := bytes.TrimSuffix(data[:i], []byte{'\r'})
		maxLine := f.t.pl.MaxLineBytes()
		switch {
		case f.tooLong >= 0:
			if err := f.send(ctx, f.prefix, f.tooLong, lineStart+int64(i)+1,
				&lineErr{fmt.Sprintf("line is longer than %d bytes", maxLine)}); err != nil {
				return err
			}
			f.tooLong = -1
		case len(line) > maxLine:
			// Longer than allowed but shorter than the buffer.
			if err := f.send(ctx, line[:maxLine], lineStart, lineStart+int64(i)+1,
				&lineErr{fmt.Sprintf("line is longer than %d bytes", maxLine)}); err != nil {
				return err
			}
		default:
			if err := f.send(ctx, line, lineStart, lineStart+int64(i)+1, nil); err != nil {
				return err
			}
		}
		f.start += i + 1
	}
	if f.start == f.end {
		f.start, f.end = 0, 0
		return nil
	}
	if f.end < len(f.buf) {
		return nil
	}
	if f.start > 0 {
		f.end = copy(f.buf, f.buf[f.start:f.end])
		f.start = 0
		return nil
	}
	// A full buffer without a newline: the line is too long. Keep its start
	// for the dead letter and discard the rest up to its newline.
	if f.tooLong < 0 {
		f.tooLong = f.readPos - int64(f.end)
		f.prefix = append(f.prefix[:0], f.buf[:min(f.end, f.t.pl.MaxLineBytes())]...)
	}
	f.start, f.end = 0, 0
	return nil
}

type lineErr struct{ detail string }

func (e *lineErr) Error() string { return e.detail }

func (f *follower) send(ctx context.Context, line []byte, off, end int64, lerr error) error {
	if f.skip != nil {
		if pl, ok := f.skip[off]; ok {
			// Already on Kafka from the last run: pass it as acknowledged
			// there, so the position moves on and the floors learn where.
			delete(f.skip, off)
			f.acks.AckAt(f.acks.Add(end), pl.topic, pl.part, pl.off)
			f.t.pl.stats.Deduplicated.Add(1)
			if len(f.skip) == 0 {
				f.dropSkips(false)
			}
			return nil
		}
	}
	seq := f.acks.Add(end)
	l := Line{Data: line, Source: f.path, IDPrefix: f.idPrefix, Offset: off}
	if lerr != nil {
		l.Err = tooLongErr(lerr.Error())
	}
	return f.t.pl.Send(ctx, &l, f.acks, seq)
}

// checkRotation looks at path after reading hit the end of the open file.
// It returns true when it switched to another file.
func (f *follower) checkRotation(ctx context.Context) (bool, error) {
	cur, err := f.f.Stat()
	if err != nil {
		return false, fmt.Errorf("tail %s: %w", f.path, err)
	}
	fi, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil // moved away, not yet recreated: keep draining the old file
	case err != nil:
		return false, fmt.Errorf("tail %s: %w", f.path, err)
	case !os.SameFile(fi, cur):
		// Rotated. A writer may still append to the old file until it
		// reopens; one more read after seeing the new file catches what
		// it wrote before we looked.
		for {
			n, err := f.f.Read(f.buf[f.end:])
			if n > 0 {
				f.end += n
				f.readPos += int64(n)
				if err := f.lines(ctx); err != nil {
					return false, err
				}
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return false, fmt.Errorf("tail %s: %w", f.path, err)
			}
			break
		}
		if f.end > f.start { // an unterminated last line: it will never be finished
			if err := f.send(ctx, f.buf[f.start:f.end], f.readPos-int64(f.end-f.start), f.readPos, nil); err != nil {
				return false, err
			}
		}
		if err := f.waitAcked(ctx); err != nil {
			return false, err
		}
		nf, err := os.Open(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // rotated again already; the next check finds it
		}
		if err != nil {
			return false, fmt.Errorf("tail %s: %w", f.path, err)
		}
		nfi, err := nf.Stat()
		if err != nil {
			_ = nf.Close()
			return false, fmt.Errorf("tail %s: %w", f.path, err)
		}
		f.t.pl.stats.Rotations.Add(1)
		f.t.log.Info("followed rotation", "path", f.path)
		f.switchTo(nf, fileIDOf(nfi), 0, 0)
		return true, nil
	case cur.Size() < f.readPos:
		// Truncated in place (copytruncate). Lines written after our last
		// read and before the truncation are gone: nobody can read them.
		if err := f.waitAcked(ctx); err != nil {
			return false, err
		}
		if _, err := f.f.Seek(0, io.SeekStart); err != nil {
			return false, fmt.Errorf("tail %s: %w", f.path, err)
		}
		f.t.pl.stats.Truncates.Add(1)
		f.t.log.Warn("file truncated; reading it from the start", "path", f.path)
		f.mu.Lock()
		gen := f.gen + 1
		f.mu.Unlock()
		f.switchTo(f.f, f.id, gen, 0)
		return true, nil
	}
	// Following the file at path, at its end: sets of other files are of
	// files that will not be read again (lost while ingest was down).
	f.dropSkips(true)
	return false, nil
}

// waitAcked waits until every line of the current file is acknowledged,
// so the state never holds two files for one path. Rotations are rare; the
// wait is one linger plus one produce round trip.
func (f *follower) waitAcked(ctx context.Context) error {
	return f.acks.Wait(ctx)
}

// findByID returns the file in dir with identity id, or "".
func findByID(dir string, id fileID) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(p); err == nil && fileIDOf(fi) == id {
			return p
		}
	}
	return ""
}
