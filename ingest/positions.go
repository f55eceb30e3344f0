package ingest

// The tail's positions live in Kafka, beside the records they account for.
//
// Each commit of the tail is one Kafka transaction holding the records of
// the lines read since the last commit and, on the positions topic, one
// record per file whose position moved: "every line before this byte
// offset is in a committed transaction". Both become visible together or
// not at all, so after any crash the committed positions say exactly
// which lines are on Kafka for read_committed readers: a restart sends
// each line once. This is how Kafka Connect makes source connectors
// exactly once (KIP-618: records and source offsets in one transaction,
// offsets in a compacted topic).
//
// The positions topic is compacted and every record goes to its partition
// 0. A record's key is "<tail_id>/<dev>:<ino>:<gen>": the tail's id, the
// file's identity (device and inode when first seen) and a generation
// that tells apart the contents one device and inode held: a file
// truncated in place, whose old content lives on in a copy with a
// position of its own, or an inode reused. A new content takes a
// generation no position of the tail id has (Tailer.newKey); its value
// is a filePos in JSON, or nothing (a tombstone) for a file forgotten.
// The key
// "<tail_id>/start" holds the marker a load writes (below).
//
// Reading the positions back must see every committed transaction of this
// tail id. A read_committed consumer stops at the last stable offset, in
// front of any transaction still open, and a transaction of this tail that
// died open ends only when its transactional id is used again. So a load
// first commits a transaction of its own holding a fresh marker, which
// fences and aborts whatever this tail id left open, and then reads the
// partition until it meets that marker: everything committed before it is
// then behind it. The reader keeps control records, so a marker whose
// transaction ended aborted although its commit was answered (franz-go
// turns a commit it takes for empty into an abort) shows as its abort
// marker, past the marker's offset: a new marker is then written.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PositionsTopicConfigs are the topic configs the positions topic is
// created with: compacted, so it keeps the last position of each file,
// with hourly segments so that compaction (which skips the open segment)
// keeps what a start reads small.
func PositionsTopicConfigs() map[string]string {
	return map[string]string{"cleanup.policy": "compact", "segment.ms": "3600000", "min.cleanable.dirty.ratio": "0.1"}
}

// posKey is a file's identity in the positions topic and in record ids.
type posKey struct {
	Dev, Ino, Gen uint64
}

// filePos is a file's position as the positions topic holds it.
type filePos struct {
	// Path is the followed path the file was found at; Name its name when
	// last seen (a rotated file's new name), for messages.
	Path string `json:"path"`
	Name string `json:"name,omitempty"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	Gen  uint64 `json:"gen"`
	// Offset: every line before it is delivered.
	Offset int64 `json:"offset"`
	// Size is how far the file was read, for saying how much was never
	// read if it disappears.
	Size int64 `json:"size"`
	// FPLen and FP fingerprint the file: the xxh3 hash of its first FPLen
	// bytes, so that a reused inode is not taken for the file, and a copy
	// of it (copytruncate) is recognised by its content.
	FPLen int    `json:"fp_len"`
	FP    uint64 `json:"fp"`
	// Rotated: the file no longer is at Path. Done: read to its end and
	// closed for good; kept so that a start does not read it again.
	Rotated bool `json:"rotated,omitempty"`
	Done    bool `json:"done,omitempty"`
	// SinceMs is when this tail id first followed Path, in Unix ms: a
	// rotated file changed after it is one this tail has to read.
	SinceMs int64 `json:"since_ms"`
}

func (p filePos) key() posKey { return posKey{p.Dev, p.Ino, p.Gen} }

// sameButSize reports whether p and q differ at most in Size, which moves
// with every read and alone is not worth a record.
func (p filePos) sameButSize(q filePos) bool {
	p.Size = q.Size
	return p == q
}

// positionStore reads and writes one tail id's positions.
type positionStore struct {
	prod   *Producer
	topic  string
	tailID string
	log    *slog.Logger
	// sayEvery is how often a load that waits says what it waits for.
	sayEvery time.Duration
}

func (s *positionStore) recordKey(k posKey) []byte {
	return []byte(s.tailID + "/" + strconv.FormatUint(k.Dev, 10) + ":" + strconv.FormatUint(k.Ino, 10) + ":" + strconv.FormatUint(k.Gen, 10))
}

// record returns the position record of p, or a tombstone of k when p is
// nil.
func (s *positionStore) record(k posKey, p *filePos) *kgo.Record {
	r := &kgo.Record{Topic: s.topic, Key: s.recordKey(k)}
	if p != nil {
		r.Value, _ = json.Marshal(p) // plain fields: cannot fail
	}
	return r
}

// parseKey reads a record key of this tail id; ok is false for another
// tail's key or the marker.
func (s *positionStore) parseKey(key []byte) (posKey, bool) {
	rest, ok := strings.CutPrefix(string(key), s.tailID+"/")
	if !ok {
		return posKey{}, false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return posKey{}, false
	}
	var n [3]uint64
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil || strconv.FormatUint(v, 10) != p {
			return posKey{}, false // only the form recordKey writes
		}
		n[i] = v
	}
	return posKey{n[0], n[1], n[2]}, true
}

// load commits a fresh marker in a transaction of its own (fencing and
// aborting any transaction this tail id left open) and reads the
// positions topic until it meets the marker. It must not run while a
// transaction of the producer is open. It waits for Kafka as long as ctx
// allows.
func (s *positionStore) load(ctx context.Context) (map[posKey]filePos, error) {
	// A start can wait long here (a broker down, or a transaction another
	// tail left open on the topic holding the read back until it times
	// out): the wait is said, with what it waits for.
	var waitingFor atomic.Pointer[func() string]
	waiting := func(f func() string) { waitingFor.Store(&f) }
	stopSaying := s.sayWaits(&waitingFor)
	defer stopSaying()
	for {
		markerAt, marker, err := s.writeMarker(ctx, waiting)
		if err != nil {
			return nil, err
		}
		out, committed, err := s.readToMarker(ctx, marker, markerAt, waiting)
		if err != nil || committed {
			return out, err
		}
		// The marker's transaction ended aborted although Kafka answered
		// its commit (franz-go turns a commit it takes for empty into an
		// abort, and says so only in its log): a new marker is written.
		if s.log != nil {
			s.log.Warn(fmt.Sprintf("tail: loading positions: the start marker at offset %d of %s/0 was aborted, not committed; writing a new one", markerAt, s.topic))
		}
	}
}

// writeMarker commits a fresh marker in a transaction of its own, fencing
// and aborting any transaction this tail id left open, and returns its
// offset and value.
func (s *positionStore) writeMarker(ctx context.Context, waiting func(func() string)) (int64, string, error) {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	marker := hex.EncodeToString(nonce[:])
	cl := s.prod.cl
	waiting(func() string {
		return fmt.Sprintf("kafka to fence tail id %s and commit its start marker to %s", s.tailID, s.topic)
	})
	// A transaction left open by a failed attempt (an abort Kafka did not
	// confirm) is ended first; with none open this does nothing.
	if err := abortTxn(ctx, cl); err != nil {
		return 0, "", fmt.Errorf("end the open transaction: %w", err)
	}
	if err := cl.BeginTransaction(); err != nil {
		return 0, "", fmt.Errorf("begin transaction: %w", err)
	}
	var perr error
	markerAt := int64(-1)
	cl.Produce(ctx, &kgo.Record{Topic: s.topic, Key: []byte(s.markerKey()), Value: []byte(marker)}, func(r *kgo.Record, err error) { perr, markerAt = err, r.Offset })
	err := cl.Flush(ctx)
	if err == nil {
		err = perr
	}
	if err == nil {
		err = cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err != nil {
		_ = abortTxn(ctx, cl)
		return 0, "", fmt.Errorf("write the start marker to %s: %w", s.topic, err)
	}
	return markerAt, marker, nil
}

func (s *positionStore) markerKey() string { return s.tailID + "/start" }

// readToMarker reads the positions topic from its start with a
// read_committed reader until it meets the marker at markerAt, or learns
// the marker was aborted: the reader keeps control records, so the
// marker's abort, or anything else past the marker, shows that it was not
// committed (a committed marker is always read first).
func (s *positionStore) readToMarker(ctx context.Context, marker string, markerAt int64, waiting func(func() string)) (_ map[posKey]filePos, committed bool, _ error) {
	rd, err := kgo.NewClient(append(slices.Clone(s.prod.opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return nil, false, fmt.Errorf("positions reader: %w", err)
	}
	defer rd.Close()
	markerKey := s.markerKey()
	out := map[posKey]filePos{}
	var readTo atomic.Int64
	waiting(func() string { return s.readWait(rd, markerAt, readTo.Load()) })
	for {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("read %s: %w", s.topic, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = errors.Join(ferr, fmt.Errorf("read %s/%d: %w", t, p, err)) })
		if ferr != nil {
			return nil, false, ferr
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if n := len(p.Records); n > 0 {
				readTo.Store(p.Records[n-1].Offset + 1)
			}
		})
		found, past := false, false
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case found || past:
			case r.Offset > markerAt:
				past = true
			case r.Attrs.IsControl():
			case string(r.Key) == markerKey:
				found = r.Offset == markerAt && string(r.Value) == marker
			default:
				s.apply(out, r)
			}
		})
		switch {
		case found:
			return out, true, nil
		case past:
			return nil, false, nil
		}
	}
}

// apply applies a position record of this tail id to out; other records
// are passed over.
func (s *positionStore) apply(out map[posKey]filePos, r *kgo.Record) {
	k, ok := s.parseKey(r.Key)
	if !ok {
		return
	}
	if r.Value == nil {
		delete(out, k)
		return
	}
	var p filePos
	if json.Unmarshal(r.Value, &p) == nil && p.key() == k {
		out[k] = p
	}
}

// stableOffset asks Kafka, through rd, for the last stable offset of the
// positions partition.
func (s *positionStore) stableOffset(rd *kgo.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(rd).ListCommittedOffsets(ctx, s.topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return 0, err
	}
	lo, ok := listed.Lookup(s.topic, 0)
	if !ok {
		return 0, fmt.Errorf("%s/0 not listed", s.topic)
	}
	return lo.Offset, nil
}

// readWait says what a load reading up to its marker at markerAt, and
// read to readTo, waits for: the partition's last stable offset, asked of
// Kafka through rd, tells whether a transaction left open holds the read
// back.
func (s *positionStore) readWait(rd *kgo.Client, markerAt, readTo int64) string {
	what := fmt.Sprintf("the positions in %s/0 up to the start marker at offset %d: read to offset %d", s.topic, markerAt, readTo)
	stable, err := s.stableOffset(rd)
	switch {
	case err != nil:
		return what + fmt.Sprintf("; the partition's last stable offset not known (%v)", err)
	case stable <= markerAt:
		return what + fmt.Sprintf("; the partition's last stable offset is %d, in front of the marker: a transaction left open on it holds read_committed readers back until it ends or times out", stable)
	default:
		return what + fmt.Sprintf("; the partition's last stable offset is %d", stable)
	}
}

// sayWaits logs what *waitingFor says every s.sayEvery until the returned
// func is called.
func (s *positionStore) sayWaits(waitingFor *atomic.Pointer[func() string]) (stop func()) {
	if s.log == nil || s.sayEvery <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(s.sayEvery)
		defer tick.Stop()
		for began := time.Now(); ; {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			s.log.Info(fmt.Sprintf("tail: loading positions: waiting for %s", (*waitingFor.Load())()),
				"waited", time.Since(began).Round(time.Second).String())
		}
	})
	return func() { close(done); wg.Wait() }
}

// abortTxn abandons the open transaction of cl: it fails what is buffered
// and has the coordinator abort the rest. It waits for Kafka as long as
// ctx allows; a transaction it could not end is aborted by the broker when
// its timeout passes, or by the next load, which fences the id.
func abortTxn(ctx context.Context, cl *kgo.Client) error {
	if err := cl.AbortBufferedRecords(ctx); err != nil {
		cl.UnsafeAbortBufferedRecords()
	}
	return cl.EndTransaction(ctx, kgo.TryAbort)
}
