package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/keyheat/keyheat/schemas"
)

// fpBytes is how much of a file's start its fingerprint covers, as
// Filebeat's and the OpenTelemetry collector's do. A shorter file is
// fingerprinted by what it has, and matched by prefix.
const fpBytes = 1024

// fingerprint is the xxh3 hash of a file's first n bytes.
type fingerprint struct {
	n   int
	sum uint64
}

// minTelling is how many bytes a fingerprint must cover to tell files
// apart by content alone (a copy from another file): a few lines. A
// shorter one, of a file just created or caught in the middle of its
// first write, matches every file starting with the same few bytes
// ({"key": …); it still tells a reused inode from the file it had.
const minTelling = 256

// telling reports whether fp covers enough to tell files apart by content
// alone.
func (fp fingerprint) telling() bool { return fp.n >= minTelling }

// fingerprintOf hashes the first min(size, fpBytes) bytes of f.
func fingerprintOf(f *os.File, size int64) (fingerprint, error) {
	n := int(min(size, fpBytes))
	if n <= 0 {
		return fingerprint{}, nil
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return fingerprint{}, err
	}
	return fingerprint{n: n, sum: xxh3.Hash(buf)}, nil
}

// matches reports whether f, of size size, starts with the bytes fp was
// taken of. An empty fingerprint matches every file.
func (fp fingerprint) matches(f *os.File, size int64) bool {
	if fp.n == 0 {
		return true
	}
	if size < int64(fp.n) {
		return false
	}
	buf := make([]byte, fp.n)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return xxh3.Hash(buf) == fp.sum
}

// tfile is one file a watch reads: the live file at its path, or a
// rotated one still being drained. Its fields belong to the watch's
// goroutine while it holds the tailer's gate for reading, and to the
// committer while it holds the gate for writing.
type tfile struct {
	w    *watch
	key  posKey // identity in positions and ids; a copy read for a truncated file keeps the original's
	f    *os.File
	name string // name on disk when last known
	fp   fingerprint

	idPrefix string
	readPos  int64  // file offset just past the bytes in buf
	buf      []byte // unconsumed bytes are buf[start:end]
	start    int
	end      int
	tooLong  int64 // >= 0: discarding a too-long line that started here
	prefix   []byte

	startOff   int64   // where reading began: the position if nothing was ever committed
	committed  filePos // as last committed (zero Path: never)
	lastGrowth time.Time
	rotated    bool // no longer at the path
	done       bool // read to its end and closed for good once committed
	tombstone  bool // forget its position at the next commit, then drop it

	// byPattern: taken in only because its name matches ingest.rotated,
	// never seen at the path. Its first lines are judged (sampled,
	// rejected) to say once when it does not look like a log of the path.
	byPattern bool
	sampled   int
	rejected  int
	judged    bool
	// compressed: its first bytes, read after it was taken in, are a
	// compressor's (a compressor was writing it when it was seen empty):
	// it is never read as lines.
	compressed bool
}

// notALogSample is how many lines of a file taken in by its name are
// judged: most of them dead-lettered, it is said not to look like a log.
const notALogSample = 20

// newTFile starts reading f, whose identity is key, at off.
func (w *watch) newTFile(f *os.File, name string, key posKey, off int64, fp fingerprint) *tfile {
	tf := &tfile{w: w, key: key, f: f, name: name, fp: fp, startOff: off, lastGrowth: time.Now()}
	w.markSeen(f)
	tf.setPos(off)
	tf.idPrefix = schemas.RecordID{Kind: schemas.IDTail, Path: w.path, Dev: key.Dev, Ino: key.Ino, FileGen: key.Gen}.Prefix()
	return tf
}

// setPos makes off the next byte to read.
func (tf *tfile) setPos(off int64) {
	tf.readPos, tf.start, tf.end, tf.tooLong = off, 0, 0, -1
}

// sent is the offset after the last line handed to Kafka: every line
// before it is in the open transaction or an earlier one.
func (tf *tfile) sent() int64 {
	if tf.tooLong >= 0 {
		return tf.tooLong
	}
	return tf.readPos - int64(tf.end-tf.start)
}

// pos is tf's position as the next commit would record it.
func (tf *tfile) pos() filePos {
	return filePos{Path: tf.w.path, Name: tf.name, Dev: tf.key.Dev, Ino: tf.key.Ino, Gen: tf.key.Gen,
		Offset: tf.sent(), Size: tf.readPos, FPLen: tf.fp.n, FP: tf.fp.sum,
		Rotated: tf.rotated, Done: tf.done, SinceMs: tf.w.sinceMs}
}

// read reads the next chunk and sends the complete lines in it. It
// returns whether it read anything. With check, it first makes sure the
// file was not rewritten since the last read, and again after reading,
// before it uses what it read: a file truncated and written past the old
// offset between two reads would otherwise be read from the middle of a
// line. Then it reads nothing and reports rewritten.
func (tf *tfile) read(ctx context.Context, check bool) (read, rewritten bool, err error) {
	if tf.buf == nil {
		tf.buf = make([]byte, max(tf.w.t.pl.MaxLineBytes(), 64<<10)+1)
	}
	if check {
		if rw, err := tf.rewritten(); rw || err != nil {
			return false, rw, err
		}
	}
	if tf.compressed {
		return false, false, nil
	}
	n, err := tf.f.ReadAt(tf.buf[tf.end:], tf.readPos)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, false, fmt.Errorf("tail %s: read %s: %w", tf.w.path, tf.name, err)
	}
	if n == 0 {
		return false, false, nil
	}
	if tf.byPattern && tf.readPos == 0 && tf.end == 0 {
		if kind := compression(tf.buf[:min(n, 6)]); kind != "" {
			// Taken in empty, as a compressor (logrotate's compress)
			// created it; the watch checked its head then (see
			// watch.compressed) and saw nothing yet.
			tf.compressed = true
			tf.w.notReading(fileID{Dev: tf.key.Dev, Ino: tf.key.Ino}, tf.name, kind, tf.f)
			return false, false, nil
		}
	}
	if check {
		if rw, err := tf.rewritten(); rw || err != nil {
			return false, rw, err // what was read may be the new content: dropped
		}
	}
	tf.end += n
	tf.readPos += int64(n)
	tf.lastGrowth = time.Now()
	if tf.fp.n < fpBytes {
		// A short file's fingerprint grows with it, at once: a copy of it
		// must be recognised even if it is truncated before a commit.
		tf.refreshFingerprint()
	}
	return true, false, tf.lines(ctx)
}

// lines sends every complete line in the buffer. Only a line ended by a
// newline is a line: an unterminated rest stays in the buffer until it is
// finished or the file is closed for good (finish).
func (tf *tfile) lines(ctx context.Context) error {
	maxLine := tf.w.t.pl.MaxLineBytes()
	for {
		data := tf.buf[tf.start:tf.end]
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		lineStart := tf.readPos - int64(tf.end-tf.start)
		line := bytes.TrimSuffix(data[:i], []byte{'\r'})
		var err error
		switch {
		case tf.tooLong >= 0:
			// Its start was kept; it ends here (without its line ending).
			whole := lineStart + int64(len(line)) - tf.tooLong
			err = tf.send(ctx, tf.prefix, tf.tooLong, int(whole), tooLongErr(fmt.Sprintf("line is longer than %d bytes", maxLine)), false)
		case len(line) > maxLine:
			// Longer than allowed but shorter than the buffer.
			err = tf.send(ctx, line[:maxLine], lineStart, len(line), tooLongErr(fmt.Sprintf("line is longer than %d bytes", maxLine)), false)
		default:
			err = tf.send(ctx, line, lineStart, 0, nil, false)
		}
		if err != nil {
			return err
		}
		tf.tooLong = -1
		tf.start += i + 1
	}
	if tf.start == tf.end {
		tf.start, tf.end = 0, 0
		return nil
	}
	if tf.end < len(tf.buf) {
		return nil
	}
	if tf.start > 0 {
		tf.end = copy(tf.buf, tf.buf[tf.start:tf.end])
		tf.start = 0
		return nil
	}
	// A full buffer without a newline: the line is too long. Keep its start
	// for the dead letter and discard the rest up to its newline.
	if tf.tooLong < 0 {
		tf.tooLong = tf.readPos - int64(tf.end)
		tf.prefix = append(tf.prefix[:0], tf.buf[:min(tf.end, maxLine)]...)
	}
	tf.start, tf.end = 0, 0
	return nil
}

// send hands one line to the tailer's open transaction; whole is the
// line's length when line is only its start (Line.Len).
func (tf *tfile) send(ctx context.Context, line []byte, off int64, whole int, lerr error, unterminated bool) error {
	t := tf.w.t
	l := Line{Data: line, Len: whole, Source: tf.w.path, IDPrefix: tf.idPrefix, Offset: off, Err: lerr, Unterminated: unterminated}
	err := t.pl.send(ctx, &l, t, 0, t.pending)
	if tf.byPattern && !tf.judged {
		tf.sampled++
		if l.rejected {
			tf.rejected++
		}
		if tf.sampled >= notALogSample {
			tf.judge()
		}
	}
	return err
}

// judge says, once, when most lines sampled from a file taken in by its
// name were dead-lettered: the name matched ingest.rotated, but the file
// is most likely another file beside the log (a neighbour such as
// access.log.truth.json under a pattern like {name}.*), not a rotated
// copy of it.
func (tf *tfile) judge() {
	tf.judged = true
	if tf.rejected*2 <= tf.sampled {
		return
	}
	t := tf.w.t
	t.log.Warn(fmt.Sprintf("tail %s: %s does not look like a log of it: %d of its first %d lines could not be used (dead-lettered); "+
		"it was read because its name matches ingest.rotated %s: make the patterns match only rotated copies of the file "+
		"({name}{rotated} matches only logrotate's names), or move the file out of the folder",
		tf.w.path, filepath.Base(tf.name), tf.rejected, tf.sampled, strings.Join(t.cfg.Rotated, ",")),
		"path", tf.w.path, "file", tf.name, "lines", tf.sampled, "dead_lettered", tf.rejected)
}

// finish closes tf for good: an unterminated rest is sent as the file's
// last line (it will never be finished), and tf is done, to be closed
// once the commit recording that is through.
func (tf *tfile) finish(ctx context.Context) error {
	switch {
	case tf.tooLong >= 0:
		if err := tf.send(ctx, tf.prefix, tf.tooLong, int(tf.readPos-tf.tooLong), tooLongErr(fmt.Sprintf("line is longer than %d bytes", tf.w.t.pl.MaxLineBytes())), true); err != nil {
			return err
		}
	case tf.end > tf.start:
		rest := tf.buf[tf.start:tf.end]
		if err := tf.send(ctx, bytes.TrimSuffix(rest, []byte{'\r'}), tf.readPos-int64(len(rest)), 0, nil, true); err != nil {
			return err
		}
	}
	tf.tooLong = -1
	tf.start, tf.end = 0, 0
	tf.done = true
	if tf.byPattern && !tf.judged && tf.sampled > 0 {
		tf.judge() // shorter than the sample
	}
	return nil
}

// rewind makes the committed position the next byte to read again, after
// the transaction that read past it was aborted.
func (tf *tfile) rewind(p filePos, known bool) {
	off := tf.startOff
	tf.committed = filePos{}
	if known {
		off, tf.committed = p.Offset, p
	}
	tf.setPos(off)
	tf.done = known && p.Done
}

// refreshFingerprint extends the fingerprint of a file that has grown
// since it was taken, until it covers fpBytes.
func (tf *tfile) refreshFingerprint() {
	if tf.fp.n >= fpBytes || tf.readPos <= int64(tf.fp.n) || !tf.fp.matches(tf.f, tf.readPos) {
		return // full, nothing new, or rewritten (the next read sees to that)
	}
	if fp, err := fingerprintOf(tf.f, tf.readPos); err == nil && fp.n > tf.fp.n {
		tf.fp = fp
	}
}

// rewritten reports whether the file is no longer the one read so far:
// shorter than what was read, or starting with other bytes (truncated and
// written again since the last look, as copytruncate leaves it).
func (tf *tfile) rewritten() (bool, error) {
	fi, err := tf.f.Stat()
	if err != nil {
		return false, fmt.Errorf("tail %s: %w", tf.w.path, err)
	}
	return fi.Size() < tf.readPos || !tf.fp.matches(tf.f, fi.Size()), nil
}

func (tf *tfile) close() {
	if tf.f != nil {
		_ = tf.f.Close()
		tf.f = nil
	}
	tf.buf = nil
}
