package ingest

// Exactly once across a tail crash.
//
// The state file holds each path's position P: every line before P is
// acknowledged. A crash loses what was acknowledged after the last save,
// so a restart reads those lines again. To send none of them twice, each
// save also records, per output topic and partition, a floor F: an offset
// such that every record of a line at or past P sits after F. A restart
// reads every partition from F+1 to its end, collects the keyheat-ids of
// the followed files at or past P, and the tailer skips exactly those
// lines when it reads them again, advancing its position over them as if
// Kafka had just acknowledged them.
//
// Why a floor is sound: a file's lines are produced in order by one
// goroutine, and within a partition Kafka's offsets follow produce order.
// So the record of any line in the acknowledged prefix was written before
// the record of any line past it, in the same partition; the highest such
// offset is a floor (tailAcks raises it as lines join the prefix). A path
// that has nothing outstanding may take as floor any offset acknowledged
// before that moment, from any path: its next lines are produced later
// (Tailer.positions). At a start the end offsets are a floor for lines
// produced from then on.
//
// The floors are per path, and a restart reads from the lowest floor of
// the followed paths: a single floor for all paths would be wrong, since
// one file's lines past its position may sit below another file's prefix.
//
// What a restart reads is the records since the lowest floor: for files
// whose keys span the partitions and which are busy, about what was
// produced in one save interval plus what was in flight (at most
// ProducerConfig.MaxBufferedRecords); for an idle path nothing, as its
// floor follows the others'. It is bounded by ReadBackMaxRecords; beyond
// it the restart warns and sends those lines again (at least once, same
// ids). Memory: one skip entry (~50 bytes) per record read back that
// belongs to a followed path, dropped as the line is passed.
//
// Not covered: a produce request in flight at the crash that the broker
// appends only after the restart's read-back (a process that dies with a
// request on the wire; the window is one request's flight time). Only a
// transactional producer could fence it.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/schemas"
)

// outTopic names an output topic of the Producer.
type outTopic uint8

const (
	topicEvents outTopic = iota
	topicDLQ
	numOutTopics
	// noTopic marks a line without a record (a skipped line), or one
	// whose record's place was not told.
	noTopic = numOutTopics
)

// placedAcker is an Acker that also wants to know where Kafka wrote a
// record it acknowledged; the producer calls AckAt instead of Ack(seq, nil).
type placedAcker interface {
	Acker
	AckAt(seq uint64, topic outTopic, part int32, off int64)
}

// floors holds, per output topic and partition, an offset after which
// every record of a line past the acknowledged position lies; -1 for a
// partition with nothing known (read it from its start).
type floors [numOutTopics][]int64

func (f *floors) raise(t outTopic, part int32, off int64) {
	if part < 0 {
		return
	}
	s := f[t]
	for int32(len(s)) <= part {
		s = append(s, -1)
	}
	s[part] = max(s[part], off)
	f[t] = s
}

func (f *floors) raiseAll(g floors) {
	for t := range g {
		for p, off := range g[t] {
			f.raise(outTopic(t), int32(p), off)
		}
	}
}

func (f floors) clone() floors {
	for t := range f {
		f[t] = slices.Clone(f[t])
	}
	return f
}

// toMap is the state file's form of f, keyed by topic name.
func (f floors) toMap(topics [numOutTopics]string) map[string]map[int32]int64 {
	if topics[topicEvents] == "" {
		return nil // no read-back ran (no state file): floors mean nothing
	}
	m := make(map[string]map[int32]int64, numOutTopics)
	for t, s := range f {
		pm := make(map[int32]int64, len(s))
		for p, off := range s {
			pm[int32(p)] = off
		}
		m[topics[t]] = pm
	}
	return m
}

// floorsFromMap reads a state file's floors for topics; false when it
// names other topics (the config changed) or none.
func floorsFromMap(m map[string]map[int32]int64, topics [numOutTopics]string) (floors, bool) {
	var f floors
	for t, name := range topics {
		pm, ok := m[name]
		if !ok {
			return f, false
		}
		for p, off := range pm {
			f.raise(outTopic(t), p, off)
		}
	}
	return f, true
}

func (f floors) at(t outTopic, part int32) int64 {
	if int(part) < len(f[t]) {
		return f[t][part]
	}
	return -1
}

// fileGen is one generation of one file: what a tail record id names
// besides the path and the offset.
type fileGen struct {
	ID  fileID
	Gen uint64
}

// placement is where a line's record is on Kafka.
type placement struct {
	topic outTopic
	part  int32
	off   int64
}

// skipSets are, per followed path, the lines a restart must not send
// again: file generation → line offset → where its record already is.
type skipSets map[string]map[fileGen]map[int64]placement

// readBack prepares a start: it lists the end offsets of both output
// topics (the floor of everything produced from now on) and, when the
// state file saved floors, reads each partition from the lowest floor of
// the followed paths to its end, collecting the lines already on Kafka
// past each path's saved position into t.skips. Past the cap or on a read
// that does not finish in time it warns and collects nothing: the lines
// are sent again, with their ids. Errors are returned only when Kafka
// cannot be asked at all (producing would fail as well).
func (t *Tailer) readBack(parent context.Context) error {
	prod := t.pl.Producer()
	topics := [numOutTopics]string{topicEvents: prod.topic, topicDLQ: prod.dlq}
	ctx, cancel := context.WithTimeout(parent, t.cfg.ReadBackTimeout)
	defer cancel()
	listed, err := kadm.NewClient(prod.cl).ListEndOffsets(ctx, topics[:]...)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return fmt.Errorf("tail: list the end offsets of %s and %s (is Kafka reachable?): %w", topics[0], topics[1], err)
	}
	var ends floors
	listed.Each(func(o kadm.ListedOffset) {
		for t, name := range topics {
			if name == o.Topic {
				ends.raise(outTopic(t), o.Partition, o.Offset)
			}
		}
	})
	base := ends.clone()
	for t := range base {
		for p := range base[t] {
			base[t][p]--
		}
	}
	t.mu.Lock() // positions may be polled already
	t.topics, t.base = topics, base
	t.mu.Unlock()

	// From where to read: the lowest floor of the followed paths that
	// saved any.
	saved := map[string]filePos{}
	var from floors
	for t, s := range ends {
		from[t] = make([]int64, len(s))
		for p := range s {
			from[t][p] = math.MaxInt64
		}
	}
	for _, path := range t.cfg.Paths {
		pos, ok := t.saved[path]
		if !ok {
			continue // first time: nothing of it was ever sent
		}
		fl, ok := floorsFromMap(pos.Floor, topics)
		if !ok {
			t.log.Warn("state file holds no Kafka floors for this path and these topics (older ingest, or the topics changed); "+
				"lines acknowledged after its last save are sent again, with the same keyheat-id", "path", path)
			continue
		}
		saved[path] = pos
		for tp := range from {
			for p := range from[tp] {
				from[tp][p] = min(from[tp][p], fl.at(outTopic(tp), int32(p))+1)
			}
		}
	}
	parts := map[string]map[int32]kgo.Offset{}
	total := int64(0)
	for tp, s := range from {
		for p, off := range s {
			end := ends[tp][p]
			if off >= end {
				continue // no record since the floor: nothing to read
			}
			total += end - off
			if parts[topics[tp]] == nil {
				parts[topics[tp]] = map[int32]kgo.Offset{}
			}
			parts[topics[tp]][int32(p)] = kgo.NewOffset().At(off)
		}
	}
	if total == 0 {
		return nil
	}
	if total > int64(t.cfg.ReadBackMaxRecords) {
		t.log.Warn("too much to read back for exactly once; lines acknowledged after the last save are sent again, with the same keyheat-id "+
			"(raise ingest.readback_max_records, or save more often with ingest.save_interval)",
			"records", total, "readback_max_records", t.cfg.ReadBackMaxRecords)
		return nil
	}
	skips, read, err := readSkips(ctx, prod.opts, parts, ends, topics, saved)
	switch {
	case err != nil && parent.Err() != nil:
		return err // stopping
	case err != nil:
		t.log.Warn("read-back for exactly once failed; lines acknowledged after the last save are sent again, with the same keyheat-id",
			"err", err, "records_read", read, "records", total)
		return nil
	}
	n := 0
	for _, fgs := range skips {
		for _, s := range fgs {
			n += len(s)
		}
	}
	t.mu.Lock()
	t.skips = skips
	t.mu.Unlock()
	t.log.Info("read back what the last run sent past its saved positions; those lines are not sent again",
		"records_read", read, "lines_to_skip", n)
	return nil
}

// readSkips consumes parts up to ends and returns the skip sets of the
// saved paths, and how many records it read.
func readSkips(ctx context.Context, opts []kgo.Opt, parts map[string]map[int32]kgo.Offset, ends floors,
	topics [numOutTopics]string, saved map[string]filePos) (skipSets, int64, error) {
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.ConsumePartitions(parts),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, 0, fmt.Errorf("read-back client: %w", err)
	}
	defer cl.Close()
	type tp struct {
		t outTopic
		p int32
	}
	left := map[tp]bool{}
	topicOf := map[string]outTopic{}
	for t, name := range topics {
		topicOf[name] = outTopic(t)
		for p := range parts[name] {
			left[tp{outTopic(t), p}] = true
		}
	}
	skips := skipSets{}
	read := int64(0)
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, read, fmt.Errorf("%d partitions not read to their end: %w", len(left), err)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("read %s/%d: %w", topic, p, err))
		})
		if ferr != nil {
			return nil, read, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			t := topicOf[r.Topic]
			if r.Offset+1 >= ends.at(t, r.Partition) {
				delete(left, tp{t, r.Partition})
			}
			for _, h := range r.Headers {
				if h.Key != schemas.HeaderRecordID {
					continue
				}
				id, err := schemas.ParseRecordID(string(h.Value))
				if err != nil || id.Kind != schemas.IDTail {
					break // not a tail's record
				}
				fg := fileGen{ID: fileID{Dev: id.Dev, Ino: id.Ino}, Gen: id.FileGen}
				pos, ok := saved[id.Path]
				if !ok || fg.ID == pos.ID && fg.Gen == pos.Gen && id.Offset < pos.Offset {
					break // another path's, or inside the saved prefix: never read again
				}
				if skips[id.Path] == nil {
					skips[id.Path] = map[fileGen]map[int64]placement{}
				}
				if skips[id.Path][fg] == nil {
					skips[id.Path][fg] = map[int64]placement{}
				}
				skips[id.Path][fg][id.Offset] = placement{topic: t, part: r.Partition, off: r.Offset}
				break
			}
		})
	}
	return skips, read, nil
}
