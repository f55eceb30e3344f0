package detect

import (
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// Without an archive a worker decodes binary events with their strings
// pointing into the record (schemas.DecodeAnyShared), and a record's
// Value is part of franz-go's whole fetch buffer (the response, or a
// decompressed batch). Once a batch is handled nothing of the worker
// points into it: a string kept, even the last event's in the worker's
// decode scratch, would keep that whole buffer alive until the
// partition's next record, for ever on a partition gone quiet.
func TestHandledBatchNotPinned(t *testing.T) {
	s, err := New(Config{Options: DefaultOptions(), ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")},
		Topics: OutputTopics{Events: "e", DLQ: "d", Hotkeys: "h", Windows: "w", Reports: "r", Progress: "p"}, Limits: schemas.DefaultLimits(),
		Pipeline: pipeline.DefaultOptions(), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(s.out.Close)
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	w := newPartWorker(s, tp{"e", 0}, 1, newAligner(1000, 4, nil))
	w.setStart(startInfo{committed: -1, end: -1, first: 0})
	require.True(t, w.loadStart())

	// One fetch buffer holding both records' values, as franz-go's are.
	var fetch []byte
	var ends []int
	for _, key := range []string{"user:1", "user:2"} {
		e := schemas.AccessEvent{TimeMs: now.UnixMilli(), App: "shop", Key: key, Op: "GET", Client: "10.0.0.1", Node: "n1"}
		fetch = schemas.AppendBinary(fetch, &e)
		ends = append(ends, len(fetch))
	}
	var recs []*kgo.Record
	for i, from := 0, 0; i < len(ends); i++ {
		key := []byte{'u', 's', 'e', 'r', ':', byte('1' + i)}
		recs = append(recs, &kgo.Record{Topic: "e", Offset: int64(i), Key: key, Timestamp: now, Value: fetch[from:ends[i]:ends[i]]})
		from = ends[i]
	}
	w.handle(recs)
	require.Equal(t, int64(2), w.next, "both records handled")
	require.NotNil(t, w.core, "the events reached the core")

	lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(fetch))), uintptr(unsafe.Pointer(unsafe.SliceData(fetch)))+uintptr(len(fetch))
	in := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return p >= lo && p < hi
	}
	for i, e := range w.evs[:cap(w.evs)] {
		for name, f := range map[string]string{"key": e.Key, "app": e.App, "op": e.Op, "client": e.Client, "node": e.Node} {
			require.False(t, in(f), "the worker's event %d keeps its %s %q, pointing into the fetch buffer", i, name, f)
		}
	}
}
