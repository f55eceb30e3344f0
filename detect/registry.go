package detect

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/keylog"
	"github.com/keyheat/keyheat/schemas"
)

// registryRecords returns the records h puts on the registry topic, in
// the order they must be produced: h itself under the key's record key
// (schemas.HotKeyRecordKey), and, after a cooled, a tombstone (a nil
// value) under the same record key, so that compaction drops the key from
// the topic once it cooled. Both go to the key's partition of the topic
// in that order (the producer is idempotent: order per partition holds
// through retries), so a reader sees the cooled, then the tombstone.
//
// The caller counts every record returned among the destinations that
// must acknowledge h before its commit claim is released: a crash before
// the tombstone reached Kafka re-emits the cooled, and its tombstone,
// under the same ID.
//
// A manual registry entry lives under another record key (it starts
// "m:", which no HotKeyRecordKey does: those start with the app's length,
// a digit), so a detector tombstone never removes one.
func registryRecords(topic string, h *schemas.HotKeyEvent) ([]*kgo.Record, error) {
	v, err := h.AppendJSON(nil)
	if err != nil {
		return nil, err
	}
	key := schemas.HotKeyRecordKey(h.App, h.Key)
	recs := []*kgo.Record{{Topic: topic, Key: key, Value: v}}
	if h.Type == schemas.HotKeyCooled {
		recs = append(recs, &kgo.Record{Topic: topic, Key: key})
	}
	return recs, nil
}

// updateAtMs returns the event time an update is about, its slot
// boundary: the time its ID ends with (schemas.HotKeyID), checked by
// building the ID again from the event's fields. ok is false when the ID
// is not one HotKeyID built for h.
func updateAtMs(h *schemas.HotKeyEvent) (ms int64, ok bool) {
	i := strings.LastIndexByte(h.ID, '/')
	if i < 0 {
		return 0, false
	}
	ms, err := strconv.ParseInt(h.ID[i+1:], 10, 64)
	if err != nil || schemas.HotKeyID(h.Topic, h.Partition, h.Rule, h.Type, h.App, h.Key, ms) != h.ID {
		return 0, false
	}
	return ms, true
}

// logHotKey says at DEBUG that h is being published, its key as
// internal/keylog shows keys. The sinks, the registry and Print carry
// the key itself; the log names it by its key_hash unless LogRawKeys,
// and never shows h.ID, which holds the key.
func (s *Service) logHotKey(h *schemas.HotKeyEvent) {
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	s.log.Debug("publishing a hot-key event", "type", h.Type, "app", h.App, keylog.Attr(h.Key, s.cfg.LogRawKeys),
		"rule", h.Rule, "rate", h.Rate, "onset", time.UnixMilli(h.OnsetMs).UTC(), "topic", h.Topic, "partition", h.Partition)
}
