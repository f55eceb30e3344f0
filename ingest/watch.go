package ingest

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zeebo/xxh3"
)

// watch follows one path: the live file at it and the rotated files it
// had, which are drained oldest first before the live file is read, so
// that lines go out in the order they were written. Its goroutine reads
// and looks at the path while holding the tailer's gate for reading.
type watch struct {
	t       *Tailer
	path    string           // absolute
	rotated []rotatedPattern // absolute patterns of its rotated names
	sinceMs int64            // when this tail id first followed path

	files []*tfile // rotated files oldest first; the live file, when open, last
	live  *tfile
	seen  map[fileID]bool // every file followed in this run, done ones too

	announcedWaiting bool
	lastScan         time.Time
	knownFPs         []fingerprint   // of files read to their end, in this run or before
	warnedCompressed map[fileID]bool // compressed files already reported
}

// scanInterval is how often an idle watch looks at its rotated names.
const scanInterval = time.Second

// markSeen remembers that f was followed, so it is never taken for a
// rotated file not yet read.
func (w *watch) markSeen(f *os.File) {
	if fi, err := f.Stat(); err == nil {
		if w.seen == nil {
			w.seen = map[fileID]bool{}
		}
		w.seen[fileIDOf(fi)] = true
	}
}

// candidate is a file that may hold lines of a watch: the file at its
// path or one matching its rotated patterns. It is opened only when its
// content is needed, so looking at a folder of many files costs a stat
// each.
type candidate struct {
	name   string
	fi     os.FileInfo
	id     fileID
	glob   bool // matched a rotated pattern (not just found in the folder)
	taken  bool
	f      *os.File
	failed bool
}

// open opens the file once; nil when it is gone or another file has its
// name since it was looked at.
func (c *candidate) open() *os.File {
	if c.f == nil && !c.failed {
		f, err := os.Open(c.name)
		if err == nil && sameID(f, c.id) {
			c.f = f
		} else {
			if f != nil {
				_ = f.Close()
			}
			c.failed = true
		}
	}
	return c.f
}

// startsWith reports whether the file starts with the bytes fp was taken
// of.
func (c *candidate) startsWith(fp fingerprint) bool {
	f := c.open()
	return f != nil && fp.matches(f, c.fi.Size())
}

// close closes the file unless it was taken.
func (c *candidate) close() {
	if c.f != nil && !c.taken {
		_ = c.f.Close()
		c.f = nil
	}
}

// findCandidates lists the regular files in path's folder: the ones
// matching the rotated patterns, and, so that a rotated file is found by
// its identity whatever its new name, every other one too (glob false).
// Followed paths are left out. The caller closes the ones it opened and
// did not take.
func (w *watch) findCandidates(skip map[string]bool) []*candidate {
	entries, err := os.ReadDir(filepath.Dir(w.path))
	if err != nil {
		return nil
	}
	var out []*candidate
	for _, e := range entries {
		name := filepath.Join(filepath.Dir(w.path), e.Name())
		if skip[name] || !e.Type().IsRegular() {
			continue
		}
		glob := false
		for _, g := range w.rotated {
			glob = glob || g.match(name)
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, &candidate{name: name, fi: fi, id: fileIDOf(fi), glob: glob})
	}
	return out
}

// plan is where a start reads one file from, and why, for the start line.
type plan struct {
	tf  *tfile
	why string
}

// start decides, from the positions saved for this path, which files to
// read and from where, opens them and says so in one line. pinned is the
// file at the path as Run found it before talking to Kafka, at startMs
// (none when there was none); saved are this path's positions; followed
// are the followed paths, never taken for rotated files of this one. It
// returns the keys of positions to forget (files gone).
//
// The file pinned may have been rotated away while the start waited for
// Kafka; it is then the oldest file to read, and the files that went by
// since (changed after startMs) and the one now at the path are read
// after it, from their start.
func (w *watch) start(pinned pin, startMs int64, saved []filePos, fromStart bool, followed map[string]bool) (forget []posKey) {
	t := w.t
	w.sinceMs = startMs
	for _, p := range saved {
		w.sinceMs = min(w.sinceMs, p.SinceMs)
	}
	cands := w.findCandidates(followed)
	var live, pin *candidate
	pinSize := pinned.size
	if pinned.f != nil {
		if fi, err := pinned.f.Stat(); err == nil {
			pin = &candidate{name: w.path, f: pinned.f, fi: fi, id: fileIDOf(fi), glob: true}
			cands = slices.DeleteFunc(cands, func(c *candidate) bool {
				if c.id == pin.id {
					pin.name = c.name // rotated away: its name now
					return true
				}
				return false
			})
			cands = append(cands, pin)
			if cur, err := os.Stat(w.path); err == nil && os.SameFile(cur, fi) {
				live, pin.name = pin, w.path
			}
		} else {
			_ = pinned.f.Close()
		}
	}
	if live == nil {
		// Nothing was at the path when ingest started, or what was there
		// has been rotated away since: the file there now, if any, is new.
		if f, err := os.Open(w.path); err == nil {
			if fi, err := f.Stat(); err == nil {
				live = &candidate{name: w.path, f: f, fi: fi, id: fileIDOf(fi)}
				cands = slices.DeleteFunc(cands, func(c *candidate) bool { return c.id == live.id })
				cands = append(cands, live)
			} else {
				_ = f.Close()
			}
		}
	}
	defer func() {
		for _, c := range cands {
			c.close()
		}
	}()

	var plans []plan
	var notes []string
	liveTaken := false
	// Files with a saved position: found by identity (device, inode and
	// the fingerprint of their start), or else by content among the
	// rotated names (a copy made by copytruncate).
	for _, p := range saved {
		fp := fingerprint{n: p.FPLen, sum: p.FP}
		var c *candidate
		for _, x := range cands {
			if !x.taken && x.id == (fileID{Dev: p.Dev, Ino: p.Ino}) && x.fi.Size() >= p.Offset && x.startsWith(fp) {
				c = x
				break
			}
		}
		for _, x := range cands {
			if c == nil && !x.taken && x.glob && x.fi.Size() >= p.Offset && fp.telling() && !w.compressed(x) && x.startsWith(fp) {
				c = x
			}
		}
		switch {
		case c == nil && p.Done:
			forget = append(forget, p.key()) // read to its end, then deleted: nothing to say
			continue
		case c == nil:
			// Only what was read and not sent is known to be lost; what was
			// written after the last read is not known at all.
			lost := max(0, p.Size-p.Offset)
			t.pl.stats.UnreadBytes.Add(lost)
			t.pl.stats.GoneFiles.Add(1)
			msg := fmt.Sprintf("tail %s: %s is gone; at least %d bytes of it after byte %d were never read", w.path, p.Name, lost, p.Offset)
			if lost == 0 {
				msg = fmt.Sprintf("tail %s: %s is gone; it was read to byte %d, and whatever was written to it after that was never read", w.path, p.Name, p.Offset)
			}
			t.log.Error(msg, "path", w.path, "file", p.Name, "unread_bytes", lost,
				"hint", "the rotated files were deleted (logrotate rotate count) before ingest read them; keep more, or restart ingest sooner")
			forget = append(forget, p.key())
			continue
		}
		if p.Done {
			w.markSeen(c.open())
			w.knownFPs = append(w.knownFPs, fp)
			c.taken = true
			c.close()
			continue // read already; kept so it is not read again
		}
		c.taken = true
		tf := w.newTFile(c.f, c.name, p.key(), p.Offset, fp)
		tf.committed = p
		tf.rotated = c != live
		if c == live {
			liveTaken = true
			w.live = tf
		}
		plans = append(plans, plan{tf, fmt.Sprintf("from byte %d, its saved position", p.Offset)})
	}
	// Files with none: the file pinned at the start and rotated away
	// since; files rotated while ingest was down or since it started
	// (changed after this tail first followed the path); everything
	// rotated, at a first start with --from-start.
	for _, c := range cands {
		if c.taken || c == live || !c.glob {
			continue
		}
		off, why := int64(0), ""
		switch {
		case c == pin && len(saved) == 0 && !fromStart:
			off = pinSize
			why = fmt.Sprintf("from byte %d, its end when ingest started (rotated since)", off)
		case c == pin:
			why = "from its start (at the path when ingest started, rotated since)"
		case len(saved) == 0 && fromStart:
			why = "from its start (--from-start)"
		case c.fi.ModTime().UnixMilli() > w.sinceMs && len(saved) > 0:
			why = "from its start: rotated while ingest was down"
		case c.fi.ModTime().UnixMilli() > w.sinceMs:
			why = "from its start: rotated since ingest started"
		default:
			continue
		}
		if w.compressed(c) || c.open() == nil {
			continue
		}
		c.taken = true
		fp, _ := fingerprintOf(c.f, c.fi.Size())
		tf := w.newTFile(c.f, c.name, t.newKey(c.id), off, fp)
		tf.rotated = true
		tf.byPattern = c != pin
		plans = append(plans, plan{tf, why})
	}
	// Oldest first, the live file last.
	slices.SortStableFunc(plans, func(a, b plan) int {
		switch {
		case a.tf == w.live:
			return 1
		case b.tf == w.live:
			return -1
		}
		return olderFirst(a.tf, b.tf)
	})
	switch {
	case live != nil && !liveTaken:
		live.taken = true
		fp, _ := fingerprintOf(live.f, live.fi.Size())
		off, why := int64(0), ""
		switch {
		case len(saved) > 0:
			why = "from its start: it is new since the last run"
		case fromStart:
			why = "from its start (--from-start)"
		case live != pin:
			why = "from its start: it is new since ingest started"
		default:
			off = pinSize
			why = fmt.Sprintf("from its end, byte %d: new lines only (no saved position; --from-start sends what it holds already)", off)
		}
		w.live = w.newTFile(live.f, w.path, t.newKey(live.id), off, fp)
		plans = append(plans, plan{w.live, why})
	case live == nil:
		notes = append(notes, "waiting for it to appear (it will be read from its start)")
		w.announcedWaiting = true
	}
	if fromStart && len(saved) > 0 {
		notes = append(notes, fmt.Sprintf("--from-start does not apply: positions are saved for it under tail_id %s (another --ingest.tail_id starts over)", t.id))
	}
	for _, p := range plans {
		w.files = append(w.files, p.tf)
		what := "reading it "
		if p.tf != w.live {
			what = "first draining " + filepath.Base(p.tf.name) + " "
		}
		notes = append(notes, what+p.why)
	}
	t.log.Info(fmt.Sprintf("tail %s: %s", w.path, strings.Join(notes, "; ")), "path", w.path, "tail_id", t.id)
	return forget
}

// olderFirst orders rotated files by when they were last written. File
// times tick in jiffies, so files rotated in quick succession can share
// one; then logrotate's names decide: name.2 is older than name.1, and
// dated names (name-20250317) sort by date.
func olderFirst(a, b *tfile) int {
	if c := cmp.Compare(mtime(a.f), mtime(b.f)); c != 0 {
		return c
	}
	na, oka := rotationNumber(a.name)
	nb, okb := rotationNumber(b.name)
	if oka && okb {
		return cmp.Compare(nb, na)
	}
	return strings.Compare(a.name, b.name)
}

// rotationNumber returns N of a name ending in .N (or .N.gz).
func rotationNumber(name string) (int, bool) {
	name = strings.TrimSuffix(name, ".gz")
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(name[i+1:])
	return n, err == nil && n >= 0
}

func mtime(f *os.File) int64 {
	if fi, err := f.Stat(); err == nil {
		return fi.ModTime().UnixNano()
	}
	return 0
}

// step reads one chunk from the first file that has one, in order. When
// none has, it looks at the path (rotation, truncation, a new file) and
// at the rotated files (closing the idle ones). It reports whether
// anything happened. The caller holds the gate for reading.
func (w *watch) step(ctx context.Context) (bool, error) {
	for _, tf := range w.files {
		if tf.done || tf.tombstone {
			continue
		}
		// Only the live file can be truncated in place by logrotate.
		read, rewritten, err := tf.read(ctx, tf == w.live)
		switch {
		case err != nil:
			return false, err
		case rewritten:
			return true, w.truncated(ctx)
		case read:
			return true, nil
		}
	}
	return w.check(ctx)
}

// check runs when every file is read to its end.
func (w *watch) check(ctx context.Context) (bool, error) {
	t := w.t
	changed := false
	fi, err := os.Stat(w.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if w.live != nil {
			// Moved away and not yet recreated: keep draining it.
			w.live.rotated, w.live = true, nil
			t.pl.stats.Rotations.Add(1)
			changed = true
		} else if !w.announcedWaiting && len(w.seen) == 0 {
			t.log.Info(fmt.Sprintf("tail %s: waiting for it to appear", w.path), "path", w.path)
			w.announcedWaiting = true
		}
	case err != nil:
		return false, fmt.Errorf("tail %s: %w", w.path, err)
	case w.live != nil && !sameFile(fi, w.live.f):
		// Rotated: the old file stays open and is drained first.
		w.live.rotated, w.live = true, nil
		t.pl.stats.Rotations.Add(1)
		changed = true
		fallthrough
	case w.live == nil:
		nf, err := w.openNew(fi)
		if err != nil {
			return false, err
		}
		changed = changed || nf
	}
	// Now and then, and after every rotation or truncation, the rotated
	// names are looked at for files that went by between two looks.
	if time.Since(w.lastScan) >= scanInterval {
		w.lastScan = time.Now()
		if missed := w.adoptRotated(); len(missed) > 0 {
			t.log.Warn(fmt.Sprintf("tail %s: also reading %s, rotated away before they were seen at the path", w.path, strings.Join(missed, ", ")), "path", w.path)
			changed = true
		}
	}
	// A rotated file is closed once nothing was appended to it for
	// RotatedIdle and the file at the path holds data: the writer has
	// moved on, so what it left unterminated will never be finished.
	liveHasData := w.live != nil && w.live.readPos > 0
	if w.live != nil && !liveHasData {
		if lfi, err := w.live.f.Stat(); err == nil && lfi.Size() > 0 {
			liveHasData = true
		}
	}
	for _, tf := range w.files {
		if tf == w.live || tf.done || tf.tombstone || !liveHasData || time.Since(tf.lastGrowth) < t.cfg.RotatedIdle {
			continue
		}
		if err := tf.finish(ctx); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

// openNew follows the file now at the path, from its start.
func (w *watch) openNew(fi os.FileInfo) (bool, error) {
	t := w.t
	f, err := os.Open(w.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // rotated again already; the next check sees it
	}
	if err != nil {
		return false, fmt.Errorf("tail %s: %w", w.path, err)
	}
	ofi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return false, fmt.Errorf("tail %s: %w", w.path, err)
	}
	id := fileIDOf(ofi)
	for _, tf := range w.files {
		if tf.key.Dev == id.Dev && tf.key.Ino == id.Ino && !tf.done {
			_ = f.Close() // a file already followed, moved back
			return false, nil
		}
	}
	fp, _ := fingerprintOf(f, ofi.Size())
	tf := w.newTFile(f, w.path, t.newKey(id), 0, fp)
	w.files = append(w.files, tf)
	w.live = tf
	if w.announcedWaiting {
		t.log.Info(fmt.Sprintf("tail %s: appeared; reading it from its start", w.path), "path", w.path)
		w.announcedWaiting = false
		return true, nil
	}
	missed := w.adoptRotated()
	var names []string
	for _, tf := range w.files {
		if tf != w.live {
			names = append(names, filepath.Base(tf.name))
		}
	}
	msg := fmt.Sprintf("tail %s: rotated; reading the new file after %s", w.path, strings.Join(names, ", "))
	if len(missed) > 0 {
		msg += fmt.Sprintf(" (of which %s rotated away before it was seen at the path)", strings.Join(missed, ", "))
	}
	t.log.Info(msg, "path", w.path)
	return true, nil
}

// adoptRotated looks at the rotated names after a rotation: it learns the
// new names of the files it drains, and takes in, to read from their
// start, the files matching them that it never followed but that changed
// since this tail first followed the path: files that were at the path
// and rotated away again before a look saw them (two rotations between
// two looks). The rotated files are then put oldest first before the live
// one. It returns the names of the files taken in.
func (w *watch) adoptRotated() (missed []string) {
	for _, c := range w.findCandidates(w.t.followed()) {
		if !c.glob {
			continue
		}
		var open *tfile
		for _, tf := range w.files {
			if tf.f != nil && sameID(tf.f, c.id) {
				open = tf
			}
		}
		switch {
		case open != nil:
			open.name = c.name
		case !w.seen[c.id] && c.fi.ModTime().UnixMilli() > w.sinceMs && !w.compressed(c) && c.open() != nil && !w.copyOfFollowed(c):
			fp, _ := fingerprintOf(c.f, c.fi.Size())
			tf := w.newTFile(c.f, c.name, w.t.newKey(c.id), 0, fp)
			tf.rotated, tf.byPattern = true, true
			c.taken = true
			w.files = append(w.files, tf)
			missed = append(missed, filepath.Base(c.name))
		}
		c.close()
	}
	slices.SortStableFunc(w.files, func(a, b *tfile) int {
		switch {
		case a == w.live && b == w.live:
			return 0
		case a == w.live:
			return 1
		case b == w.live:
			return -1
		case a.tombstone || b.tombstone || a.f == nil || b.f == nil:
			return 0
		}
		return olderFirst(a, b)
	})
	return missed
}

// truncated handles the live file found shorter than what was read:
// truncated in place, as logrotate's copytruncate does after copying it.
// The rest of the old content is read from the copy when one of the
// rotated names holds it (found by the fingerprint of its start); lines
// written between logrotate's copy and its truncation are in neither
// file, which is copytruncate's own race. The live file is then read from
// its start as the next generation.
func (w *watch) truncated(ctx context.Context) error {
	t := w.t
	old := w.live
	t.pl.stats.Truncates.Add(1)
	var cp *candidate
	others := w.t.followed()
	for _, c := range w.findCandidates(others) {
		if cp == nil && c.glob && c.id != (fileID{Dev: old.key.Dev, Ino: old.key.Ino}) && !w.tracks(c.id) &&
			c.fi.Size() >= old.sent() && old.fp.telling() && !w.compressed(c) && c.startsWith(old.fp) {
			cp = c
			c.taken = true
		}
		c.close()
	}
	if cp != nil {
		// The copy continues the old generation: same identity, same
		// ids, from the same offset.
		tf := &tfile{w: w, key: old.key, f: cp.f, name: cp.name, fp: old.fp, idPrefix: old.idPrefix,
			startOff: old.startOff, committed: old.committed, lastGrowth: time.Now(), rotated: true}
		tf.setPos(old.sent())
		w.markSeen(cp.f)
		w.files = slices.Insert(w.files, slices.Index(w.files, old), tf)
		t.log.Warn(fmt.Sprintf("tail %s: truncated in place (copytruncate); reading the rest of the old content from %s, from byte %d",
			w.path, filepath.Base(cp.name), old.sent()), "path", w.path)
	} else {
		// The unterminated rest will never be finished.
		if err := old.finish(ctx); err != nil {
			return err
		}
		old.done = false
		t.log.Warn(fmt.Sprintf("tail %s: truncated in place, and no rotated file holds a copy of it; lines written after byte %d before the truncation, if any, cannot be read",
			w.path, old.readPos), "path", w.path, "rotated", strings.Join(w.t.cfg.Rotated, ","))
		// The old generation is forgotten in the commit that starts the
		// new one.
		gone := &tfile{w: w, key: old.key, committed: old.committed, tombstone: true}
		w.files = slices.Insert(w.files, slices.Index(w.files, old), gone)
	}
	// The live file restarts as its next generation.
	fi, err := old.f.Stat()
	if err != nil {
		return fmt.Errorf("tail %s: %w", w.path, err)
	}
	fp, _ := fingerprintOf(old.f, fi.Size())
	next := w.newTFile(old.f, w.path, t.newKey(fileID{Dev: old.key.Dev, Ino: old.key.Ino}), 0, fp)
	w.files[slices.Index(w.files, old)] = next
	w.live = next
	// Truncated more than once since the last look: the copies of the
	// generations in between are new files among the rotated names.
	if missed := w.adoptRotated(); len(missed) > 0 {
		t.log.Warn(fmt.Sprintf("tail %s: also reading %s, copies made before the last truncation was seen", w.path, strings.Join(missed, ", ")), "path", w.path)
	}
	return nil
}

// copyOfFollowed reports whether c starts like a file w follows: a copy
// of it (a backup, or copytruncate's copy, which truncated claims), whose
// lines are read from the original.
func (w *watch) copyOfFollowed(c *candidate) bool {
	for _, tf := range w.files {
		if tf.f != nil && tf.fp.telling() && c.startsWith(tf.fp) {
			return true
		}
	}
	return false
}

// compressed reports whether c is a compressed file (gzip, bzip2, xz,
// zstd), which tail does not read. A gzip file whose content starts like
// a file this watch read or reads is left alone quietly (logrotate's
// compress made it of one); any other is reported once, since its lines
// may never have been read.
func (w *watch) compressed(c *candidate) bool {
	f := c.open()
	if f == nil {
		return false
	}
	var head [6]byte
	n, _ := f.ReadAt(head[:], 0)
	kind := compression(head[:n])
	if kind == "" {
		return false
	}
	w.notReading(c.id, c.name, kind, f)
	return true
}

// notReading says once that the file f named name, compressed by kind, is
// not read, unless it is a gzip whose content starts like a file this
// watch read or reads (logrotate's compress made it of one).
func (w *watch) notReading(id fileID, name, kind string, f *os.File) {
	if w.warnedCompressed[id] {
		return
	}
	if kind == "gzip" && w.gzipOfKnown(f) {
		return
	}
	if w.warnedCompressed == nil {
		w.warnedCompressed = map[fileID]bool{}
	}
	w.warnedCompressed[id] = true
	w.t.log.Warn(fmt.Sprintf("tail %s: %s is %s-compressed and not read; if it holds lines never read (compressed before ingest got to them), send them with: zcat %s | ingest stdin (logrotate's delaycompress avoids this)",
		w.path, filepath.Base(name), kind, name), "path", w.path)
}

// compression names the compression head starts with, or "".
func compression(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return "gzip"
	case bytes.HasPrefix(head, []byte("BZh")):
		return "bzip2"
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "xz"
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "zstd"
	}
	return ""
}

// gzipOfKnown reports whether the gzip file f decompresses to content
// starting like a file this watch read or reads.
func (w *watch) gzipOfKnown(f *os.File) bool {
	zr, err := gzip.NewReader(io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		return false
	}
	defer zr.Close()
	head := make([]byte, fpBytes)
	n, _ := io.ReadFull(zr, head)
	head = head[:n]
	fps := slices.Clone(w.knownFPs)
	for _, tf := range w.files {
		fps = append(fps, tf.fp)
	}
	for _, fp := range fps {
		if fp.telling() && fp.n <= len(head) && xxh3.Hash(head[:fp.n]) == fp.sum {
			return true
		}
	}
	return false
}

// tracks reports whether a file with identity id is open in w.
func (w *watch) tracks(id fileID) bool {
	for _, tf := range w.files {
		if tf.f != nil && sameID(tf.f, id) {
			return true
		}
	}
	return false
}

func sameID(f *os.File, id fileID) bool {
	fi, err := f.Stat()
	return err == nil && fileIDOf(fi) == id
}

func sameFile(fi os.FileInfo, f *os.File) bool {
	cur, err := f.Stat()
	return err == nil && os.SameFile(fi, cur)
}
