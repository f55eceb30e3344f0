package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/keyheat/keyheat/schemas"
)

// PartitionWriter archives the events of one partition of an events
// topic, handed to it in offset order by the one goroutine that consumes
// the partition. It cuts the partition into segments (offset ranges); a
// segment's events are written, per app and UTC hour of event time, into
// one file each, all made durable together. Durable says how far that has
// got, which is how far the consumer may commit. doc.go explains why a
// restart from any committed offset writes no event twice.
//
// Append, Advance and Flush are called by the partition's goroutine;
// Durable may be read from any goroutine; the archive's own goroutine
// rolls segments by age under the same lock.
type PartitionWriter struct {
	a         *Archive
	key       partKey
	topic     string
	partition int32
	stateDir  string

	mu sync.Mutex
	// next is the lowest offset not handed over yet (by Append or Advance).
	next int64
	// pos is the lowest offset not covered by a finished segment or by a
	// durable segment found at start: where the next new segment begins.
	pos int64
	// recovered are the segments found at start that the partition has
	// not reached the end of yet, by First.
	recovered []*recoveredSegment
	// skipping is set while next lies inside a complete recovered segment.
	skipping bool
	open     *segment
	enc      *encoder[schemas.EventRow]
	// free holds empty row chunks for the next segment; keys, sorted,
	// counts and batch are scratch space of writeSorted.
	free   [][]schemas.EventRow
	keys   []sortKey
	sorted []sortKey
	counts []int32
	batch  []schemas.EventRow
	err    error
	closed bool

	durable atomic.Int64
}

type recoveredSegment struct {
	m        *manifest
	complete bool
}

// segment is the open segment: events buffered per bucket until the roll.
type segment struct {
	first int64
	// limit is the last offset the segment may cover: the recorded Last
	// of a segment being re-written, or the offset before the next
	// recovered segment, or MaxInt64.
	limit int64
	// rewrite is the manifest of the recovered segment being re-written,
	// nil for a new segment.
	rewrite   *manifest
	buckets   map[bucketKey]*bucket
	last      *bucket
	bytes     int64
	events    int64
	startedAt time.Time
}

type bucketKey struct {
	app    string
	hourMs int64
}

// bucket holds one app-hour's rows of the open segment in fixed-size
// chunks taken from the writer's free list, so a segment's rows are
// neither copied as they grow nor reallocated for the next segment.
type bucket struct {
	key    bucketKey
	dir    string
	chunks [][]schemas.EventRow
	n      int
}

// A bucket's chunks grow from minChunkRows to chunkRows rows (8192 rows,
// about 1.2 MB).
const (
	minChunkRows = 256
	chunkRows    = 8192
)

// eventOverhead is the memory a buffered event takes beyond its strings:
// its row.
const eventOverhead = int64(unsafe.Sizeof(schemas.EventRow{}))

// IncompleteSegmentError is returned by Partition when the start offset
// lies inside a segment whose files are not all durable. Only a segment
// that is entirely durable lets the durable offset pass its start, so a
// consumer committing no more than Durable never gets here; resuming from
// First re-writes the segment whole.
type IncompleteSegmentError struct {
	Topic       string
	Partition   int32
	Start       int64
	First, Last int64
}

func (e *IncompleteSegmentError) Error() string {
	return fmt.Sprintf("archive %s/%d: start offset %d is inside segment [%d, %d] whose files are not all durable; resume from offset %d",
		e.Topic, e.Partition, e.Start, e.First, e.Last, e.First)
}

// Partition opens the writer of partition of topic, whose consumer
// resumes at startOffset (the committed offset). It removes files a
// crashed writer of this partition left in staging, and reads the
// partition's segment manifests, so segments recorded at or after
// startOffset are not written twice. Close the writer when the partition
// is revoked.
func (a *Archive) Partition(ctx context.Context, topic string, partition int32, startOffset int64) (*PartitionWriter, error) {
	if topic == "" || partition < 0 || startOffset < 0 {
		return nil, fmt.Errorf("archive partition %q/%d at offset %d: want a topic, a partition >= 0 and an offset >= 0", topic, partition, startOffset)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := &PartitionWriter{
		a: a, key: partKey{topic, partition}, topic: topic, partition: partition,
		stateDir: partitionStateDir(topic, partition),
		next:     startOffset, pos: startOffset,
		enc: newEncoder[schemas.EventRow](a.opts, KindEvents, "time_ms", "offset", "event_index").
			// Min/max of string pages cost a sixth of the write time and
			// prune nothing useful (one app per file; keys in no order).
			skipStats("app", "key", "op", "client", "node", "topic"),
		batch: make([]schemas.EventRow, 0, 1024),
	}
	if err := p.recover(startOffset); err != nil {
		return nil, err
	}
	p.durable.Store(startOffset)
	if err := a.register(p.key, p); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *PartitionWriter) tmpDir() string      { return p.stateDir + "/tmp" }
func (p *PartitionWriter) segmentsDir() string { return p.stateDir + "/segments" }

func (p *PartitionWriter) recover(start int64) error {
	fsys := p.a.fs
	if err := cleanStaging(fsys, p.tmpDir()); err != nil {
		return err
	}
	ms, err := readManifests(fsys, p.segmentsDir(), p.topic, p.partition)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Last < start {
			continue
		}
		complete, err := m.complete(fsys)
		if err != nil {
			return err
		}
		if m.First < start && !complete {
			return &IncompleteSegmentError{Topic: p.topic, Partition: p.partition, Start: start, First: m.First, Last: m.Last}
		}
		p.recovered = append(p.recovered, &recoveredSegment{m: m, complete: complete})
	}
	if n := len(p.recovered); n > 0 {
		p.a.log.Info("archive partition resumes over recorded segments", "topic", p.topic, "partition", p.partition,
			"start", start, "segments", n, "first", p.recovered[0].m.First, "last", p.recovered[n-1].m.Last)
	}
	return nil
}

// cleanStaging removes what a crashed writer left in a staging folder.
func cleanStaging(fsys FS, dir string) error {
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fsys.MkdirAll(dir)
	}
	if err != nil {
		return fmt.Errorf("list staging %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() || !isTemp(e.Name()) {
			continue
		}
		if err := fsys.Remove(path.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("remove leftover %s/%s: %w", dir, e.Name(), err)
		}
	}
	return nil
}

// Append hands over the events of the record read at offset, in the
// order the record gave them: each is archived with its index in evs, so
// a record that gave several events (a raw log line naming several keys)
// is archived whole. A record is appended once, all its events at once,
// which is what keeps Durable per offset: a segment never ends inside a
// record. Offsets must increase; gaps are fine (records that were not
// events), and a record with no events is as good as Advance(offset+1).
// Events that a durable segment recorded by an earlier run already holds
// are not written again.
//
// Once a roll fails, the writer refuses everything with that error: its
// buffered events are not durable and never will be, so the consumer must
// stop, not commit, and reopen the partition.
func (p *PartitionWriter) Append(offset int64, evs ...schemas.AccessEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(); err != nil {
		return err
	}
	if offset < p.next {
		return fmt.Errorf("archive %s/%d: offset %d after %d; hand events over in offset order", p.topic, p.partition, offset, p.next-1)
	}
	if len(evs) > math.MaxInt32 {
		return fmt.Errorf("archive %s/%d: offset %d holds %d events; a record's events are indexed by int32, split the record", p.topic, p.partition, offset, len(evs))
	}
	if len(evs) == 0 {
		return p.advance(offset + 1)
	}
	if err := p.reach(offset); err != nil {
		return p.fail(err)
	}
	p.next = offset + 1
	p.a.m.events.Add(float64(len(evs)))
	if p.skipping {
		p.a.m.skipped.Add(float64(len(evs)))
		p.publishDurable()
		return nil
	}
	s := p.open
	if s == nil {
		s = p.startSegment(p.pos)
	}
	for i := range evs {
		e := &evs[i]
		b := s.last
		if b == nil || b.key.app != e.App || e.TimeMs < b.key.hourMs || e.TimeMs >= b.key.hourMs+hourMs {
			b = s.bucket(e.App, e.TimeMs)
		}
		if len(b.chunks) == 0 || len(b.chunks[len(b.chunks)-1]) == cap(b.chunks[len(b.chunks)-1]) {
			b.chunks = append(b.chunks, p.chunk(b.n))
		}
		last := &b.chunks[len(b.chunks)-1]
		*last = append(*last, schemas.MakeEventRow(p.topic, p.partition, offset, int32(i), e))
		b.n++
		s.bytes += eventOverhead + int64(len(e.Key)+len(e.App)+len(e.Op)+len(e.Client)+len(e.Node))
	}
	s.events += int64(len(evs))
	switch {
	case offset == s.limit && s.rewrite != nil:
		return p.rollErr(offset, "rewrite")
	case offset == s.limit:
		return p.rollErr(offset, "boundary")
	case s.rewrite == nil && s.bytes >= p.a.opts.SegmentBytes:
		return p.rollErr(offset, "size")
	}
	return nil
}

// Advance hands over every offset below offset: records the consumer
// read that held no event for the archive (dead-lettered, filtered). It
// lets Durable pass them, and closes a segment whose end they reach.
func (p *PartitionWriter) Advance(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(); err != nil {
		return err
	}
	return p.advance(offset)
}

func (p *PartitionWriter) advance(offset int64) error {
	if offset <= p.next {
		return nil
	}
	if err := p.reach(offset); err != nil {
		return p.fail(err)
	}
	p.next = offset
	if p.open == nil && !p.skipping {
		// Nothing is buffered, so the next segment may start here: Durable
		// never moves back to offsets it already passed.
		p.pos = max(p.pos, offset)
	}
	p.publishDurable()
	return nil
}

// Flush rolls the open segment now, covering every offset handed over,
// and returns once it is durable: what a consumer does before giving a
// partition up. A segment being re-written after a restart is the
// exception: it must end where the earlier run ended it, so it stays open
// and Durable stays at its start.
func (p *PartitionWriter) Flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.open != nil && p.open.rewrite == nil {
		return p.rollErr(p.next-1, "flush")
	}
	return nil
}

// Durable returns the offset below which every offset handed over is
// durable in the archive (or held no event): the highest offset the
// partition's consumer may commit as far as the archive is concerned.
func (p *PartitionWriter) Durable() int64 { return p.durable.Load() }

// Close flushes as Flush does and releases the partition, so it can be
// opened again (by this archive or, after a rebalance, another process).
// A segment being re-written is dropped unfinished: its recorded files,
// whole or not, stay as they are and the next owner re-writes it. Calling
// Close again returns nil.
func (p *PartitionWriter) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	var err error
	if p.err == nil && p.open != nil && p.open.rewrite == nil {
		err = p.roll(p.next-1, "close")
	}
	p.open = nil
	p.closed = true
	p.a.unregister(p.key, p)
	return err
}

func (p *PartitionWriter) usable() error {
	switch {
	case p.closed:
		return fmt.Errorf("archive %s/%d: %w", p.topic, p.partition, ErrClosed)
	case p.err != nil:
		return p.err
	}
	return nil
}

func (p *PartitionWriter) fail(err error) error {
	p.err = fmt.Errorf("archive %s/%d: %w (the writer stopped; reopen the partition from its committed offset)", p.topic, p.partition, err)
	p.a.m.rollErrors.Inc()
	p.a.log.Error("archive roll failed", "topic", p.topic, "partition", p.partition, "err", err)
	return p.err
}

func (p *PartitionWriter) rollErr(last int64, reason string) error {
	if err := p.roll(last, reason); err != nil {
		return p.fail(err)
	}
	return nil
}

// reach moves the writer to offset: every offset below it is handed over.
// It rolls an open segment whose limit lies below offset, passes recovered
// segments that end below it, and enters the recovered segment holding it:
// skipping it when complete, re-writing it when not.
func (p *PartitionWriter) reach(offset int64) error {
	if s := p.open; s != nil && offset > s.limit {
		reason := "boundary"
		if s.rewrite != nil {
			reason = "rewrite"
		}
		if err := p.roll(s.limit, reason); err != nil {
			return err
		}
	}
	p.skipping = false
	for len(p.recovered) > 0 {
		r := p.recovered[0]
		if r.m.Last < offset {
			// Passed without any event of it: a complete one is durable
			// already; an incomplete one lost events Kafka no longer has.
			if !r.complete {
				p.a.log.Error("archive segment stays incomplete: its offsets were passed without events",
					"topic", p.topic, "partition", p.partition, "first", r.m.First, "last", r.m.Last)
			}
			p.pos = max(p.pos, r.m.Last+1)
			p.recovered = p.recovered[1:]
			continue
		}
		if r.m.First > offset {
			break
		}
		if r.complete {
			p.skipping = true
			break
		}
		if p.open == nil {
			// A new segment never crosses a recovered one (its limit), so
			// nothing is open here but possibly this segment's own re-write.
			s := p.startSegment(r.m.First)
			s.limit, s.rewrite = r.m.Last, r.m
			p.recovered = p.recovered[1:]
		}
		break
	}
	return nil
}

// startSegment opens a segment at first, limited by the next recovered
// segment.
func (p *PartitionWriter) startSegment(first int64) *segment {
	s := &segment{first: first, limit: math.MaxInt64, buckets: make(map[bucketKey]*bucket), startedAt: p.a.now()}
	if len(p.recovered) > 0 {
		s.limit = p.recovered[0].m.First - 1
	}
	p.open = s
	p.publishDurable()
	return s
}

func (s *segment) bucket(app string, tsMs int64) *bucket {
	k := bucketKey{app: app, hourMs: hourOf(tsMs)}
	b := s.buckets[k]
	if b == nil {
		b = &bucket{key: k, dir: bucketDir(KindEvents, app, k.hourMs)}
		s.buckets[k] = b
	}
	s.last = b
	return b
}

func (p *PartitionWriter) publishDurable() {
	d := p.next
	if p.open != nil {
		d = min(d, p.open.first)
	}
	p.durable.Store(d)
}

func (p *PartitionWriter) rollIfOlder(now time.Time, age time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.open
	if p.closed || p.err != nil || s == nil || s.rewrite != nil || now.Sub(s.startedAt) < age {
		return
	}
	_ = p.rollErr(p.next-1, "age")
}

// roll makes the open segment durable as [first, last]: it writes each
// bucket into staging, records the segment's manifest, then moves the
// files to their place. doc.go explains why this order is crash-safe.
func (p *PartitionWriter) roll(last int64, reason string) error {
	s := p.open
	if s == nil {
		return nil
	}
	if s.events == 0 && s.rewrite == nil {
		p.open, p.pos = nil, last+1
		p.publishDurable()
		return nil
	}
	if s.events == 0 {
		p.a.log.Error("archive segment stays incomplete: re-reading it found none of its events",
			"topic", p.topic, "partition", p.partition, "first", s.first, "last", last)
		p.open, p.pos = nil, last+1
		p.publishDurable()
		return nil
	}
	start := time.Now()
	fsys := p.a.fs
	m := &manifest{Version: manifestVersion, Topic: p.topic, Partition: p.partition, First: s.first, Last: last}
	buckets := make([]*bucket, 0, len(s.buckets))
	for _, b := range s.buckets {
		buckets = append(buckets, b)
	}
	slices.SortFunc(buckets, func(x, y *bucket) int { return strings.Compare(x.dir, y.dir) })
	name := eventFileName(p.topic, p.partition, s.first, last)
	tmps := make([]string, len(buckets))
	meta := []string{"keyheat.topic", p.topic, "keyheat.partition", strconv.Itoa(int(p.partition)),
		"keyheat.first_offset", strconv.FormatInt(s.first, 10), "keyheat.last_offset", strconv.FormatInt(last, 10)}
	for i, b := range buckets {
		tmps[i] = fmt.Sprintf("%s/%d_%d%s", p.tmpDir(), s.first, i, tempSuffix)
		size, err := p.enc.writeFileFunc(fsys, tmps[i], func(write func([]schemas.EventRow) error) error {
			return p.writeSorted(b, write)
		}, meta...)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, manifestFile{Path: b.dir + "/" + name, Rows: int64(b.n), Bytes: size})
	}
	if s.rewrite != nil {
		if !m.sameFiles(s.rewrite) {
			p.a.log.Error("archive segment re-written with different files than recorded; the input changed since",
				"topic", p.topic, "partition", p.partition, "first", s.first, "last", last)
		}
	}
	// Sizes differ from the record, with the same rows, when the zstd
	// level or the layout version changed since: record them too, or
	// every restart would take the segment for incomplete.
	if s.rewrite == nil || !slices.Equal(m.Files, s.rewrite.Files) {
		if err := p.writeManifest(m); err != nil {
			return err
		}
	}
	dirs := make(map[string]bool)
	for i, f := range m.Files {
		dir := path.Dir(f.Path)
		if !dirs[dir] {
			if err := fsys.MkdirAll(dir); err != nil {
				return fmt.Errorf("create %s: %w", dir, err)
			}
			dirs[dir] = true
		}
		if err := fsys.Rename(tmps[i], f.Path); err != nil {
			return fmt.Errorf("publish %s: %w", f.Path, err)
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if err := fsys.SyncDir(dir); err != nil {
			return fmt.Errorf("fsync %s: %w", dir, err)
		}
	}
	var bytes int64
	for _, f := range m.Files {
		bytes += f.Bytes
	}
	p.a.m.segments.WithLabelValues(reason).Inc()
	p.a.m.files.WithLabelValues(KindEvents).Add(float64(len(m.Files)))
	p.a.m.rows.WithLabelValues(KindEvents).Add(float64(s.events))
	p.a.m.bytes.WithLabelValues(KindEvents).Add(float64(bytes))
	p.a.m.rollTime.Observe(time.Since(start).Seconds())
	p.open, p.pos = nil, last+1
	p.publishDurable()
	for _, b := range buckets {
		for _, c := range b.chunks {
			if cap(c) == chunkRows {
				clear(c) // drop the strings for the collector
				p.free = append(p.free, c[:0])
			}
		}
	}
	return nil
}

// chunk returns an empty row chunk for a bucket holding rows rows: small
// for a small bucket, so a segment spread over many apps and hours does not
// take a full chunk per bucket; full-size chunks come from the free list.
func (p *PartitionWriter) chunk(rows int) []schemas.EventRow {
	size := min(chunkRows, max(minChunkRows, rows))
	if n := len(p.free); n > 0 && size == chunkRows {
		c := p.free[n-1]
		p.free = p.free[:n-1]
		return c
	}
	return make([]schemas.EventRow, 0, size)
}

// sortKey is a row's place in the replay order, without pointers, so
// sorting moves 16 bytes a row and no write barriers.
type sortKey struct {
	tsMs   int64
	ci, ri int32 // chunk and row: (offset, index) order
}

// writeSorted hands b's rows to write in (time, offset, index) order, in
// batches. Rows arrive in (offset, index) order, so sorting the positions
// by (time, position) gives that order.
func (p *PartitionWriter) writeSorted(b *bucket, write func([]schemas.EventRow) error) error {
	keys := p.keys[:0]
	defer func() { p.keys = keys[:0] }()
	sorted := true
	for ci, c := range b.chunks {
		for ri := range c {
			k := sortKey{tsMs: c[ri].TimeMs, ci: int32(ci), ri: int32(ri)}
			if len(keys) > 0 && k.tsMs < keys[len(keys)-1].tsMs {
				sorted = false
			}
			keys = append(keys, k)
		}
	}
	if sorted {
		for _, c := range b.chunks {
			if err := write(c); err != nil {
				return err
			}
		}
		return nil
	}
	batch := p.batch[:0]
	for _, k := range p.sortKeys(keys) {
		batch = append(batch, b.chunks[k.ci][k.ri])
		if len(batch) == cap(batch) {
			if err := write(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		if err := write(batch); err != nil {
			return err
		}
	}
	clear(batch[:cap(batch)])
	return nil
}

// sortKeys orders keys, given in position order, by (time, position).
// A segment's events usually span far fewer milliseconds than there are
// events, so a counting sort on the time (stable, so positions stay in
// order) does it in two passes; a wide span falls back to pdqsort.
func (p *PartitionWriter) sortKeys(keys []sortKey) []sortKey {
	lo, hi := keys[0].tsMs, keys[0].tsMs
	for _, k := range keys {
		lo, hi = min(lo, k.tsMs), max(hi, k.tsMs)
	}
	if span := uint64(hi - lo); span >= uint64(4*len(keys)+4096) {
		slices.SortFunc(keys, func(x, y sortKey) int {
			if c := cmpInt(x.tsMs, y.tsMs); c != 0 {
				return c
			}
			if x.ci != y.ci {
				return int(x.ci - y.ci)
			}
			return int(x.ri - y.ri)
		})
		return keys
	}
	counts := slices.Grow(p.counts[:0], int(hi-lo)+2)[:int(hi-lo)+2]
	clear(counts)
	for _, k := range keys {
		counts[k.tsMs-lo+1]++
	}
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	out := slices.Grow(p.sorted[:0], len(keys))[:len(keys)]
	for _, k := range keys {
		out[counts[k.tsMs-lo]] = k
		counts[k.tsMs-lo]++
	}
	p.counts, p.sorted = counts, out
	return out
}

// writeManifest makes m durable in the segments folder: staged, fsynced,
// renamed, folder fsynced.
func (p *PartitionWriter) writeManifest(m *manifest) error {
	fsys := p.a.fs
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode segment manifest: %w", err)
	}
	dir := p.segmentsDir()
	if err := fsys.MkdirAll(dir); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp := fmt.Sprintf("%s/%s%s", p.tmpDir(), manifestName(m.First, m.Last), tempSuffix)
	final := dir + "/" + manifestName(m.First, m.Last)
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", tmp, err), f.Close())
	}
	if err := f.Sync(); err != nil {
		return errors.Join(fmt.Errorf("fsync %s: %w", tmp, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, final); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
