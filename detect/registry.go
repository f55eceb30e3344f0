package detect

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect/internal/ledger"
	"github.com/keyheat/keyheat/internal/keylog"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/clickhouse"
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

// publishHotKey publishes h, as a partition's worker and the merger's
// cluster stage both do: to the registry (registryRecords: h, and after
// a cooled its tombstone), ClickHouse and the archive (arch, nil without
// one), which all dedupe by ID. add records the output in the caller's
// ledger, done once need destinations acknowledged it; the archive
// acknowledges once flushed. archWhat names the archive in an error. It
// reports false when it failed the service.
func publishHotKey[K any](ctx context.Context, s *Service, l *ledger.Ledger[K], arch *ledger.Archive[K, *schemas.HotKeyEvent],
	h *schemas.HotKeyEvent, add func(need int) ledger.Ticket, archWhat string) bool {
	s.logHotKey(h)
	recs, err := registryRecords(s.cfg.Topics.Hotkeys, h)
	if err != nil {
		s.fail(fmt.Errorf("detect: %w", err))
		return false
	}
	need := len(recs)
	if s.cfg.ClickHouse != nil {
		need++
	}
	if arch != nil {
		need++
	}
	t := add(need)
	for _, r := range recs {
		s.produce(ctx, r, l.Sent(t))
	}
	if ch := s.cfg.ClickHouse; ch != nil {
		t0 := time.Now()
		err := ch.WriteHotKey(ctx, h, clickhouse.AckFunc(l.Sent(t)))
		s.m.produceWait.Add(time.Since(t0).Seconds())
		if err != nil {
			l.Unsent()
			if ctx.Err() == nil {
				s.fail(fmt.Errorf("detect: clickhouse: %w", err))
			}
			return false
		}
	}
	if arch != nil {
		if err := arch.Append(t, h); err != nil {
			s.fail(fmt.Errorf("detect: %s: %w", archWhat, err))
			return false
		}
	}
	s.m.alerts.WithLabelValues(h.Type).Inc()
	if h.Type == schemas.HotKeyHot {
		s.m.alertDelay.Observe(float64(h.DetectedMs-h.OnsetMs) / 1000)
	}
	s.print.hotKey(h)
	return true
}
