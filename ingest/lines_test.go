package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// TestSendOneRecordPerKey: a line naming several keys produces one event
// per key, each with the line's id, and the line is acknowledged once,
// after all of them; a line one of whose keys is invalid is dead-lettered
// whole, once.
func TestSendOneRecordPerKey(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 3)
		parser, err := logparse.New(logparse.Config{Format: "redis"})
		require.NoError(t, err)
		pl, err := NewLineSender(LineSenderConfig{LineOptions: LineOptions{MaxLineBytes: 256}, Parser: parser,
			Producer: k.producer(t, schemas.JSON), Limits: schemas.Limits{MaxKeyBytes: 16}})
		require.NoError(t, err)
		input := strings.Join([]string{
			`1742220131.1 [0 [::1]:6379] "mget" "user:1" "user:2" "user:3"`,
			`1742220131.2 [0 127.0.0.1:1] "get" "user:4"`,
			`1742220131.3 [0 unix:/tmp/r.sock] "mset" "user:5" "v" "user:6" "v"`,
			`1742220131.4 [0 127.0.0.1:1] "del" "user:7" "a-key-that-is-far-too-long"`,
		}, "\n")
		require.NoError(t, ReadLines(context.Background(), strings.NewReader(input), pl, StdinConfig{}))

		// The records of a line share its position and differ in Index,
		// 0, 1, … in the order the command names the keys.
		lines := map[string][]string{}
		seen := map[string]bool{}
		for _, r := range readAll(t, k.seeds, k.events) {
			text := header(r, schemas.HeaderRecordID)
			require.False(t, seen[text], "id %s twice", text)
			seen[text] = true
			id, err := schemas.ParseRecordID(text)
			require.NoError(t, err)
			index := id.Index
			id.Index = 0
			keys := lines[id.String()]
			for len(keys) <= index {
				keys = append(keys, "")
			}
			keys[index] = string(r.Key)
			lines[id.String()] = keys
		}
		var perLine [][]string
		for _, keys := range lines {
			perLine = append(perLine, keys)
		}
		require.ElementsMatch(t, [][]string{{"user:1", "user:2", "user:3"}, {"user:4"}, {"user:5", "user:6"}}, perLine,
			"one record per key, keyed by it, with its line's position and its index among the line's keys")
		dlq := readAll(t, k.seeds, k.dlq)
		require.Len(t, dlq, 1)
		var d schemas.DeadLetter
		require.NoError(t, schemas.DecodeDeadLetter(dlq[0].Value, &d))
		require.Equal(t, schemas.ReasonKeyTooLong, d.Reason)
		s := pl.Stats()
		require.EqualValues(t, 4, s.Lines.Load())
		require.EqualValues(t, 6, s.Events.Load())
		require.EqualValues(t, 1, s.DLQ.Load())
	})
}

type recordedAck struct {
	mu   sync.Mutex
	acks []error
}

func (r *recordedAck) Ack(_ uint64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, err)
}

// TestLineAcker: the line's ack comes once, after the last record's, with
// the first error whatever order the records' acks arrive in.
func TestLineAcker(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		errs []error
		want error
	}{
		{"all acknowledged", []error{nil, nil, nil}, nil},
		{"first fails", []error{boom, nil, nil}, boom},
		{"last fails", []error{nil, nil, boom}, boom},
		{"first error wins", []error{nil, boom, context.Canceled}, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var next recordedAck
			a := &lineAcker{next: &next, left: len(tc.errs)}
			var wg sync.WaitGroup
			for i, err := range tc.errs {
				if i < len(tc.errs)-1 {
					a.Ack(7, err) // in order, so "first" is well defined
					continue
				}
				wg.Go(func() { a.Ack(7, err) })
			}
			wg.Wait()
			require.Equal(t, []error{tc.want}, next.acks)
		})
	}
}

// TestSendCountsDroppedFields: an optional field that does not parse
// leaves the event going out with the field at zero, and is counted per
// field: in the stats, in the summary form and in the metric.
func TestSendCountsDroppedFields(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 1)
	parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes", Status: "status"}, "test")
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	pl, err := NewLineSender(LineSenderConfig{Parser: parser, Producer: k.producer(t, schemas.JSON), Stats: NewStats(reg)})
	require.NoError(t, err)
	input := strings.Join([]string{
		`{"key":"a","bytes":12,"status":200}`,
		`{"key":"b","bytes":"twelve","status":"HIT"}`,
		`{"key":"c","bytes":"x","status":404}`,
		`{"key":"", "bytes":"x"}`, // dead-lettered: its dropped field is not counted
	}, "\n")
	require.NoError(t, ReadLines(context.Background(), strings.NewReader(input), pl, StdinConfig{}))
	s := pl.Stats()
	require.EqualValues(t, 3, s.Events.Load())
	require.EqualValues(t, 1, s.DLQ.Load())
	require.EqualValues(t, 2, s.DroppedFields(logparse.FieldBytes))
	require.EqualValues(t, 1, s.DroppedFields(logparse.FieldStatus))
	require.Zero(t, s.DroppedFields(logparse.FieldOp))
	require.Equal(t, "bytes:2,status:1", s.DroppedSummary())
	require.Equal(t, 2.0, metricValue(t, reg, "keyheat_ingest_dropped_fields_total", "field", "bytes"))
	require.Equal(t, 1.0, metricValue(t, reg, "keyheat_ingest_dropped_fields_total", "field", "status"))
	var bytesSeen []int64
	for _, r := range readAll(t, k.seeds, k.events) {
		var e schemas.AccessEvent
		require.NoError(t, schemas.DecodeAny(r.Value, &e))
		bytesSeen = append(bytesSeen, e.Bytes)
	}
	require.ElementsMatch(t, []int64{12, 0, 0}, bytesSeen, "a field that did not parse is zero; the event still goes out")
}

// metricValue returns the value of the counter name whose label is value.
func metricValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}
