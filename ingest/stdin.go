package ingest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// StdinConfig configures ReadLines: its options and what it runs with.
type StdinConfig struct {
	DeliveryOptions
	// Source names the input in dead letters; default schemas.SourceStdin.
	Source string
	// Force, when closed, ends the wait for Kafka at once (a second
	// signal): the lines not taken go to the spill file.
	Force <-chan struct{}
	// Logger; nil discards.
	Logger *slog.Logger
}

// ReadLines sends every line of r through pl until r ends or ctx does.
// Records carry stdin record ids (schemas.IDStdin: the run's start and the
// line's byte offset), unique per run. Lines longer than pl.MaxLineBytes
// are dead-lettered with schemas.ReasonLineTooLong.
//
// A pipe cannot be read twice, so ReadLines keeps a copy of every line
// until Kafka has taken all of its records. While Kafka is unreachable,
// reading waits (the producer's buffer is full) and nothing is dropped.
// At the end of input it waits for Kafka as long as EndTimeout allows (by
// default without a deadline); when ctx ends (a stop signal) it stops
// reading and waits at most StopTimeout, or until Force is closed. What
// Kafka has not taken then, and every line whose record Kafka refused for
// good, is written to the spill file, one line as read per line, in
// order; ReadLines returns an *UndeliveredError saying where, and
// Stats.Undelivered and Stats.Spilled count them. Sending the spill file
// again (`ingest stdin < FILE`) delivers them with new ids. A line whose
// several records (a redis MGET) Kafka took only in part is spilled whole,
// and a record in flight when ReadLines gives up may have reached Kafka
// unconfirmed: those few are sent twice by the replay.
//
// The spill file is checked before anything is read: one that cannot be
// written is an error at the start, not lost lines at the end.
//
// When ctx ends, ReadLines stops at once, also while no input comes: r
// is read by a goroutine of its own, which ends when r's Read returns (a
// read of standard input cannot be interrupted; the process's exit ends
// it).
func ReadLines(ctx context.Context, r io.Reader, pl *LineSender, cfg StdinConfig) error {
	if cfg.Source == "" {
		cfg.Source = schemas.SourceStdin
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The spill file is what keeps the lines Kafka does not take; one
	// that cannot be written would lose them at the end, so it is found
	// out before anything is read.
	if err := checkSpill(cfg.SpillFile); err != nil {
		return err
	}
	maxLine := pl.MaxLineBytes()
	held := &heldLines{stats: pl.stats}
	prefix := schemas.RecordID{Kind: schemas.IDStdin, StartNs: time.Now().UnixNano()}.Prefix()
	cr := newChanReader(ctx, r)
	defer cr.close()
	br := bufio.NewReaderSize(cr, 64<<10)
	var off, lineStart int64
	// long holds the start of a line longer than the read buffer, at most
	// maxLine+1 bytes of it: enough to keep and to know it is too long.
	var long []byte
	partial := false
	var rerr error
	for ctx.Err() == nil {
		if !partial {
			lineStart = off
		}
		var line []byte
		line, rerr = br.ReadSlice('\n')
		off += int64(len(line))
		if errors.Is(rerr, bufio.ErrBufferFull) {
			if len(long) < maxLine+1 {
				long = append(long, line[:min(len(line), maxLine+1-len(long))]...)
			}
			partial = true
			continue
		}
		partial = false
		if len(long) > 0 {
			line = append(long, line...)
			long = long[:0]
		}
		if len(line) > 0 {
			data := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'})
			l := Line{Data: data, Source: cfg.Source, IDPrefix: prefix, Offset: lineStart}
			if len(data) > maxLine {
				l.Data = data[:maxLine]
				l.Len = int(off-lineStart) - (len(line) - len(data)) // line holds only its start and its end
				l.Err = tooLongErr(fmt.Sprintf("line is longer than %d bytes", maxLine))
			}
			// A record that cannot be buffered before ctx ends fails
			// through its ack, so the line stays held and is spilled.
			if pl.Send(ctx, &l, held, held.add(line)) != nil {
				break
			}
		}
		if rerr != nil {
			break
		}
	}
	if errors.Is(rerr, io.EOF) || ctx.Err() != nil {
		rerr = nil
	}
	if rerr != nil {
		rerr = fmt.Errorf("read %s: %w", cfg.Source, rerr)
	}

	giveUp, cancelGiveUp := giveUpContext(ctx, cfg.StopTimeout, cfg.Force)
	defer cancelGiveUp()
	wait, cancelWait := giveUp, context.CancelFunc(func() {})
	if cfg.EndTimeout > 0 {
		wait, cancelWait = context.WithTimeout(giveUp, cfg.EndTimeout)
	}
	defer cancelWait()
	if waiting := held.waiting(); waiting > 0 {
		log.Info(fmt.Sprintf("input read; waiting for kafka to take the last %d lines", waiting))
	}
	if err := pl.prod.Flush(wait); err != nil {
		// Give up: fail what is buffered, so that what is held now is
		// final and nothing spilled is delivered behind our back.
		pl.prod.abandon()
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = pl.prod.Flush(fctx)
		cancel()
	}
	lines := held.undelivered()
	if len(lines) == 0 {
		return rerr
	}
	n := int64(len(lines))
	pl.stats.Undelivered.Add(n)
	path, err := writeSpill(cfg.SpillFile, lines)
	if err != nil {
		log.Error(fmt.Sprintf("%d lines kafka did not take are lost: writing the spill file failed", n), "err", err)
		return errors.Join(rerr, &UndeliveredError{Lines: n, Resume: fmt.Sprintf("writing them to a spill file failed (%v), so they are lost", err)})
	}
	pl.stats.Spilled.Add(n)
	log.Error(fmt.Sprintf("wrote the %d lines kafka did not take to %s; send them later with the same format and settings: ingest stdin [flags] < %s", n, path, path))
	return errors.Join(rerr, &UndeliveredError{Lines: n, Resume: fmt.Sprintf("they are in %s; send them again with the same format and settings: ingest stdin [flags] < %s", path, path)})
}

// heldLines keeps a copy of every line read until Kafka took all of its
// records, in order, so that what it did not take can be written out.
// It is the Acker of the lines it holds.
type heldLines struct {
	stats *Stats

	mu     sync.Mutex
	base   uint64 // seq of lines[0]
	lines  []heldLine
	failed []failedLine // lines with a record Kafka did not take, in the order their acks came
	slab   []byte       // copies are cut from slabs: one allocation per MiB, not per line
}

type failedLine struct {
	seq  uint64
	data []byte
}

type heldLine struct {
	data []byte
	done bool
}

// add holds a copy of line (as read, with its newline) and returns its seq.
func (h *heldLines) add(line []byte) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cap(h.slab)-len(h.slab) < len(line) {
		h.slab = make([]byte, 0, max(1<<20, len(line)))
	}
	start := len(h.slab)
	h.slab = append(h.slab, line...)
	seq := h.base + uint64(len(h.lines))
	h.lines = append(h.lines, heldLine{data: h.slab[start:len(h.slab):len(h.slab)]})
	return seq
}

// Ack implements Acker.
func (h *heldLines) Ack(seq uint64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := int(seq - h.base)
	if i < 0 || i >= len(h.lines) || h.lines[i].done {
		return
	}
	h.lines[i].done = true
	if err != nil {
		h.failed = append(h.failed, failedLine{seq, h.lines[i].data})
	} else {
		h.stats.Delivered.Add(1)
	}
	n := 0
	for n < len(h.lines) && h.lines[n].done {
		n++
	}
	h.base += uint64(n)
	h.lines = h.lines[n:]
	if len(h.lines) == 0 {
		h.lines = nil // let the backing array go
	}
}

// waiting returns the lines held and not yet answered.
func (h *heldLines) waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.lines {
		if !l.done {
			n++
		}
	}
	return n
}

// undelivered returns the lines Kafka did not take, in the order read.
func (h *heldLines) undelivered() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	all := slices.Clone(h.failed)
	for i, l := range h.lines {
		if !l.done {
			all = append(all, failedLine{h.base + uint64(i), l.data})
		}
	}
	slices.SortFunc(all, func(a, b failedLine) int { return cmp.Compare(a.seq, b.seq) })
	out := make([][]byte, len(all))
	for i, l := range all {
		out[i] = l.data
	}
	return out
}

// checkSpill makes sure the spill file path (a new file in the temporary
// folder when empty) can be written, leaving what is on disk as it was.
func checkSpill(path string) error {
	var f *os.File
	var err error
	created := true
	_, serr := os.Stat(path)
	switch {
	case path == "":
		f, err = os.CreateTemp("", "keyheat-ingest-stdin-*.spill")
		path = os.TempDir()
	case serr == nil:
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		created = false
	default:
		f, err = os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	}
	if err != nil {
		return fmt.Errorf("stdin: the spill file %s cannot be written, so lines kafka does not take could not be kept; set ingest.spill_file to a writable path: %w", path, err)
	}
	name := f.Name()
	_ = f.Close()
	if created {
		_ = os.Remove(name)
	}
	return nil
}

// writeSpill appends lines to path (a new file in the temporary folder
// when path is empty), each ending in a newline, synced, and returns the
// path written.
func writeSpill(path string, lines [][]byte) (string, error) {
	var f *os.File
	var err error
	if path == "" {
		f, err = os.CreateTemp("", "keyheat-ingest-stdin-*.spill")
	} else {
		f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	}
	if err != nil {
		return path, fmt.Errorf("spill file: %w", err)
	}
	path = f.Name()
	if abs, aerr := filepath.Abs(path); aerr == nil {
		path = abs
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, l := range lines {
		_, _ = w.Write(l)
		if len(l) == 0 || l[len(l)-1] != '\n' {
			_ = w.WriteByte('\n')
		}
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return path, fmt.Errorf("spill file %s: %w", path, err)
	}
	return path, nil
}

// chanReader reads r on a goroutine of its own and hands over what it
// read until ctx ends: a Read of r that blocks (standard input with no
// input) then no longer holds up its caller.
type chanReader struct {
	ctx    context.Context
	chunks chan []byte
	quit   chan struct{}
	err    error // set before chunks is closed
	rest   []byte
}

func newChanReader(ctx context.Context, r io.Reader) *chanReader {
	c := &chanReader{ctx: ctx, chunks: make(chan []byte, 4), quit: make(chan struct{})}
	go func() {
		defer close(c.chunks)
		for {
			buf := make([]byte, 64<<10)
			n, err := r.Read(buf)
			if n > 0 {
				select {
				case c.chunks <- buf[:n]:
				case <-c.quit:
					return
				}
			}
			if err != nil {
				c.err = err
				return
			}
		}
	}()
	return c
}

func (c *chanReader) Read(p []byte) (int, error) {
	if len(c.rest) == 0 {
		select {
		case <-c.ctx.Done():
			return 0, c.ctx.Err()
		case b, ok := <-c.chunks:
			if !ok {
				return 0, c.err
			}
			c.rest = b
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// close lets the reading goroutine end once its Read returns.
func (c *chanReader) close() { close(c.quit) }
