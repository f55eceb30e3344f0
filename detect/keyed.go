package detect

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/keyheat/keyheat/internal/keylog"
	"github.com/keyheat/keyheat/schemas"
)

// This file decides, says and checks whether an events partition is keyed
// by access key (detect.keyed): whether every record's Kafka key is the
// key of the events it carries, so that a key lives on one partition and
// the merger may take that partition's count for the key's.

// KeyMismatchError is what Run returns when detect.keyed is true and a
// record's Kafka key is not its access key: the partitions' counts would
// be merged as if each key lived on one partition, and would undercount
// while claiming to be exact. The record and everything after it on its
// partition were not counted, and no offset past it was committed.
type KeyMismatchError struct {
	Topic     string
	Partition int32
	Offset    int64
	// RecordKey is the record's Kafka key; AccessKey the key of its
	// (first differing) event.
	RecordKey, AccessKey string
}

func (e *KeyMismatchError) Error() string {
	return fmt.Sprintf("events topic %s partition %d offset %d: the record's key %s is not its access key %s, "+
		"but detect.keyed is true; set detect.keyed: false for a topic not keyed by access key "+
		"(or auto: a partition whose records turn out not to be keyed is then merged as not keyed). "+
		"Nothing from this offset on was counted or committed",
		e.Topic, e.Partition, e.Offset, quoteKey(e.RecordKey), quoteKey(e.AccessKey))
}

// quoteKey quotes a key for a message, cut by cutKey.
func quoteKey(k string) string { return fmt.Sprintf("%q", cutKey(k)) }

// cutKey cuts a key to 64 bytes for a message: enough to recognise it.
func cutKey(k string) string {
	const max = 64
	if len(k) > max {
		return k[:max] + "…"
	}
	return k
}

// notKeyedAt is the index of the first of a record's events whose access
// key is not the record's key, -1 if every one's is.
func notKeyedAt(recordKey []byte, evs []schemas.AccessEvent) int {
	for i := range evs {
		if string(recordKey) != evs[i].Key {
			return i
		}
	}
	return -1
}

// keyedLog says once per events topic what detect.keyed decided for it,
// at INFO when its first partition starts, and at WARN, once per topic,
// when a partition of it decides otherwise (auto) or turns out not keyed
// after all. A rebalance or a restarted partition says nothing new.
type keyedLog struct {
	log     *slog.Logger
	setting string
	rawKeys bool // Config.LogRawKeys

	mu     sync.Mutex
	topics map[string]*topicKeyed
}

type topicKeyed struct {
	keyed              bool
	warnedSplit, unkey bool
}

func newKeyedLog(log *slog.Logger, setting string, rawKeys bool) *keyedLog {
	return &keyedLog{log: log, setting: setting, rawKeys: rawKeys, topics: map[string]*topicKeyed{}}
}

// decided records what a partition decided at its first event (offset,
// with recordKey and the event's accessKey as evidence).
func (l *keyedLog) decided(topic string, partition int32, offset int64, keyed bool, recordKey []byte, accessKey string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.topics[topic]
	if t == nil {
		l.topics[topic] = &topicKeyed{keyed: keyed}
		msg := "events topic not keyed by access key: a key's events may be on any partition; reports bound its count over all of them"
		if keyed {
			msg = "events topic keyed by access key: a key's events are on one partition; reports count it there"
		}
		args := []any{"topic", topic, "keyed", keyed, "setting", l.setting}
		if l.setting == KeyedAuto {
			args = append(args, "why", "the first record's key against its access key", "partition", partition, "offset", offset,
				l.keys(recordKey, accessKey))
		} else {
			args = append(args, "why", "configured (detect.keyed)")
		}
		l.log.Info(msg, args...)
		return
	}
	if t.keyed == keyed || t.warnedSplit {
		return
	}
	t.warnedSplit = true
	l.log.Warn("partitions of an events topic decided differently whether it is keyed by access key; "+
		"its reports are merged as not keyed while one of its partitions is not; set detect.keyed: false if the topic is not keyed by access key",
		"topic", topic, "first_decided_keyed", t.keyed, "partition", partition, "keyed", keyed, "offset", offset,
		l.keys(recordKey, accessKey))
}

// keys are the attributes of a record's key and its event's access key,
// as internal/keylog shows keys.
func (l *keyedLog) keys(recordKey []byte, accessKey string) slog.Attr {
	return slog.Attr{Value: slog.GroupValue(keylog.Named("record_key", string(recordKey), l.rawKeys),
		keylog.Named("access_key", accessKey, l.rawKeys))}
}

// unkeyed says that a partition decided keyed (auto) met a record whose
// key is not its access key and is merged as not keyed from its open
// windows on: at WARN for the topic's first such partition, at INFO for
// the others.
func (l *keyedLog) unkeyed(topic string, partition int32, offset int64, recordKey []byte, accessKey string) {
	l.mu.Lock()
	t := l.topics[topic]
	first := t == nil || !t.unkey
	if t != nil {
		t.unkey = true
	}
	l.mu.Unlock()
	args := []any{"topic", topic, "partition", partition, "offset", offset,
		l.keys(recordKey, accessKey)}
	if !first {
		l.log.Info("another partition of the topic switched to not keyed", args...)
		return
	}
	l.log.Warn("a record's key is not its access key on a partition detect.keyed: auto had found keyed; "+
		"the partition's windows from those open now on are merged as not keyed (counts bounded over all partitions, not exact), "+
		"and so is every other partition of the topic that meets such a record; its hot-key alerts stay its own, per partition, until detect restarts "+
		"(a restart decides from the first record after the commit, and a partition not keyed sends its candidates to the cluster-wide decision); "+
		"set detect.keyed: false if the topic is not keyed by access key",
		args...)
}
