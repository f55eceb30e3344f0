package archive

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/keyheat/keyheat/schemas"
)

// EventReader yields the archived events a Query selects in event-time
// order, merged across every file: equal times are ordered by topic,
// partition, offset and the event's index in its record, so the same
// archive always replays in the same order, a record's events in the
// order the record gave them. Feeding what it yields to the detection
// pipeline is a replay.
//
// Files are opened lazily, when the merge reaches the first event time
// they hold (from their footer statistics), and each open file holds one
// decoded row group, so memory grows with the number of files whose time
// ranges overlap, not with the archive.
//
// Not safe for concurrent use.
type EventReader struct {
	fs  FS
	q   Query
	log *slog.Logger

	pending []pendingFile // by minMs, not opened yet
	heap    []*source
	// spareCols holds decoding space of finished files for the next ones.
	spareCols []*columns
	skipped   []*BadFileError
	err       error
	closed    bool

	rows       int64            // rows of the selected row groups
	partitions map[string]int32 // topic → highest partition with a selected file, + 1
}

type pendingFile struct {
	path  string
	minMs int64
}

// source is one open file in the merge: its current row group's selected
// rows, of which the i-th (and the rows after it) are still to come.
type source struct {
	ef  *eventFile
	rg  int
	n   int // rows selected in the row group
	i   int
	cur schemas.EventRow // row i, for the heap's comparisons
}

func (s *source) head() *schemas.EventRow { return &s.cur }

// load sets cur to row i, which must exist.
func (s *source) load() { s.ef.row(s.i, &s.cur) }

// OpenEvents lists the events files of the archive at root that q selects
// and reads their footers. log nil discards logs.
func OpenEvents(ctx context.Context, root string, q Query, log *slog.Logger) (*EventReader, error) {
	fsys, err := NewDirFS(root)
	if err != nil {
		return nil, err
	}
	return OpenEventsFS(ctx, fsys, q, log)
}

// OpenEventsFS is OpenEvents on any FS.
func OpenEventsFS(ctx context.Context, fsys FS, q Query, log *slog.Logger) (*EventReader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &EventReader{fs: fsys, q: q, log: log, partitions: map[string]int32{}}
	names, err := listFiles(fsys, KindEvents, &q)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ef, err := openEventFile(fsys, name, nil)
		if err != nil {
			if err := r.bad(err); err != nil {
				return nil, err
			}
			continue
		}
		minMs := int64(1<<63 - 1)
		var rows int64
		for rg := range ef.numRowGroups() {
			lo, hi := ef.timeBounds(rg)
			if q.overlaps(lo, hi+1) {
				minMs = min(minMs, lo)
				rows += ef.pf.RowGroups()[rg].NumRows()
			}
		}
		ef.Close()
		if minMs != 1<<63-1 {
			r.pending = append(r.pending, pendingFile{path: name, minMs: minMs})
			r.rows += rows
			if info, ok := ParseEventFileName(name); ok {
				r.partitions[info.Topic] = max(r.partitions[info.Topic], info.Partition+1)
			}
		}
	}
	slices.SortStableFunc(r.pending, func(a, b pendingFile) int { return cmpInt(a.minMs, b.minMs) })
	return r, nil
}

// bad records a bad file when the query skips them, or returns it.
func (r *EventReader) bad(err error) error {
	var bf *BadFileError
	if !r.q.SkipBadFiles || !errors.As(err, &bf) {
		return err
	}
	r.log.Warn("archive file skipped", "path", bf.Path, "err", bf.Err)
	r.skipped = append(r.skipped, bf)
	return nil
}

// Skipped returns the files skipped so far (Query.SkipBadFiles). Rows a
// file yielded before it turned out corrupt were yielded.
func (r *EventReader) Skipped() []*BadFileError { return r.skipped }

// Rows returns how many rows the row groups the query selects hold, from
// their footers: what Read yields, or more when an app or key filter drops
// rows inside a row group or a bad file is skipped. A progress display's
// total.
func (r *EventReader) Rows() int64 { return r.rows }

// Partitions returns, per topic, one more than the highest partition
// number of the events files the query selects: the partition count a
// replay assumes when nobody says better. Topics are as file names spell
// them, which for a Kafka topic name of up to 120 bytes is the name
// itself (Kafka allows only letters, digits, '.', '_' and '-', none of
// which is escaped; longer names are cut and hashed).
func (r *EventReader) Partitions() map[string]int32 { return maps.Clone(r.partitions) }

// Read fills dst with the next events and returns how many; io.EOF after
// the last. The strings of the rows share memory with other rows and are
// never modified.
func (r *EventReader) Read(dst []schemas.EventRow) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.closed {
		return 0, ErrClosed
	}
	n := 0
	for n < len(dst) {
		if err := r.activate(); err != nil {
			r.err = err
			return n, err
		}
		if len(r.heap) == 0 {
			r.err = io.EOF
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		top := r.heap[0]
		if len(r.heap) == 1 {
			// One file left in play until the next pending one starts:
			// copy rows in bulk.
			limit := top.n
			if len(r.pending) > 0 {
				limit = top.countBelow(r.pending[0].minMs)
			}
			if limit > top.i {
				c := min(limit-top.i, len(dst)-n)
				for k := range c {
					top.ef.row(top.i+k, &dst[n+k])
				}
				n += c
				top.i += c
				if err := r.advance(top); err != nil {
					r.err = err
					return n, err
				}
				continue
			}
		}
		dst[n] = *top.head()
		n++
		top.i++
		if err := r.advance(top); err != nil {
			r.err = err
			return n, err
		}
	}
	return n, nil
}

// countBelow returns the index of s's first row, from row i on, whose
// time is not below tsMs (n if none): the rows of a file are in time order.
func (s *source) countBelow(tsMs int64) int {
	lo, hi := s.i, s.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.ef.timeMs(m) < tsMs {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// activate opens the pending files whose first event time the merge has
// reached, so no row of theirs can sort before the heap's top.
func (r *EventReader) activate() error {
	for len(r.pending) > 0 && (len(r.heap) == 0 || r.pending[0].minMs <= r.heap[0].head().TimeMs) {
		p := r.pending[0]
		r.pending = r.pending[1:]
		var cols *columns
		if n := len(r.spareCols); n > 0 {
			cols, r.spareCols = r.spareCols[n-1], r.spareCols[:n-1]
		}
		ef, err := openEventFile(r.fs, p.path, cols)
		if err != nil {
			if cols != nil {
				r.spareCols = append(r.spareCols, cols)
			}
			if err := r.bad(err); err != nil {
				return err
			}
			continue
		}
		s := &source{ef: ef, rg: -1}
		ok, err := r.fill(s)
		if err != nil {
			return err
		}
		if ok {
			r.heap = append(r.heap, s)
			r.up(len(r.heap) - 1)
		}
	}
	return nil
}

// fill loads s's next row group holding selected rows; false when the file
// is done (and closed).
func (r *EventReader) fill(s *source) (bool, error) {
	for {
		s.rg++
		if s.rg >= s.ef.numRowGroups() {
			r.release(s)
			return false, nil
		}
		if lo, hi := s.ef.timeBounds(s.rg); !r.q.overlaps(lo, hi+1) {
			continue
		}
		var err error
		s.n, err = s.ef.readRowGroup(s.rg, &r.q)
		s.i = 0
		if err != nil {
			r.release(s)
			return false, r.bad(err)
		}
		if s.n > 0 {
			s.load()
			return true, nil
		}
	}
}

// release closes a finished source's file and keeps its buffers for the
// next file. Rows already returned by Read were copied out, and their
// strings do not live in these buffers, so reusing them is safe.
func (r *EventReader) release(s *source) {
	s.ef.Close()
	s.cur, s.n, s.i = schemas.EventRow{}, 0, 0
	c := s.ef.columns
	for i := range c.strs {
		clear(c.strs[i][:cap(c.strs[i])])
	}
	clear(c.dict[:cap(c.dict)])
	r.spareCols = append(r.spareCols, c)
	s.ef.columns = nil
}

// advance restores the heap after the top source gave a row.
func (r *EventReader) advance(top *source) error {
	if top.i < top.n {
		top.load()
	} else {
		ok, err := r.fill(top)
		if err != nil {
			return err
		}
		if !ok {
			last := len(r.heap) - 1
			r.heap[0] = r.heap[last]
			r.heap = r.heap[:last]
		}
	}
	if len(r.heap) > 1 {
		r.down(0)
	}
	return nil
}

// less orders rows by time, topic, partition, offset, index.
func less(a, b *schemas.EventRow) bool {
	if a.TimeMs != b.TimeMs {
		return a.TimeMs < b.TimeMs
	}
	if a.Topic != b.Topic {
		return strings.Compare(a.Topic, b.Topic) < 0
	}
	if a.Partition != b.Partition {
		return a.Partition < b.Partition
	}
	if a.Offset != b.Offset {
		return a.Offset < b.Offset
	}
	return a.Index < b.Index
}

func (r *EventReader) up(i int) {
	h := r.heap
	for i > 0 {
		p := (i - 1) / 2
		if !less(h[i].head(), h[p].head()) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (r *EventReader) down(i int) {
	h := r.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if rr := l + 1; rr < len(h) && less(h[rr].head(), h[l].head()) {
			m = rr
		}
		if !less(h[m].head(), h[i].head()) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// Close releases the open files; calling it again returns nil.
func (r *EventReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, s := range r.heap {
		errs = append(errs, s.ef.Close())
	}
	r.heap, r.pending = nil, nil
	return errors.Join(errs...)
}
