package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// summaryWith is a keyed summary of window 0 on partition part of two,
// app "a" listing top and big.
func summaryWith(part int32, top, big []schemas.KeyCount) *schemas.PartitionWindow {
	var events, bytes uint64
	for _, k := range top {
		events += k.Count
		bytes += k.Bytes
	}
	return &schemas.PartitionWindow{
		Version: schemas.WindowVersion, ID: schemas.PartitionWindowID("t", part, 0), Topic: "t", Partition: part,
		Partitions: 2, StartMs: 0, EndMs: 1000, FirstOffset: -1, LastOffset: -1, Keyed: true, Events: events,
		Apps: []schemas.AppWindow{{App: "a", Events: events, Bytes: bytes, Top: top, Big: big}},
	}
}

// A key a partition counted exactly, listed in its top and in its big
// keys, is reported with its exact bytes: the big list's bytes are an
// upper bound (with their own error), never taken as a lower bound.
func TestMergeTakesExactBytesOverBigBound(t *testing.T) {
	exact := schemas.KeyCount{App: "a", Key: "k", Count: 13, Bytes: 30_912, Reads: 13, LatencyUs: 1300, Partition: 0}
	big := schemas.KeyCount{App: "a", Key: "k", Count: 12, Bytes: 31_730, BytesError: 818, Reads: 12, LatencyUs: 1200, Partition: 0}
	// Another key, only in the big list of partition 1, by a bound.
	other := schemas.KeyCount{App: "a", Key: "j", Count: 2, Bytes: 9_000, BytesError: 4_000, Partition: 1}
	m := newTestMerger(t, nil)
	require.NoError(t, m.Add(summaryWith(0, []schemas.KeyCount{exact}, []schemas.KeyCount{big}), 0, 0))
	require.NoError(t, m.Add(summaryWith(1, []schemas.KeyCount{{App: "a", Key: "i", Count: 1, Bytes: 10, Partition: 1}},
		[]schemas.KeyCount{other}), 1, 0))
	got := m.Ready(nil)
	require.Len(t, got, 1)
	r := got[0].Reports[0]
	require.Equal(t, "k", r.Top[0].Key)
	require.Equal(t, uint64(30_912), r.Top[0].Bytes, "the exact figure, not the big list's upper bound")
	require.Equal(t, uint64(13), r.Top[0].Reads)
	require.Equal(t, "k", r.TopBytes[0].Key)
	require.Equal(t, uint64(30_912), r.TopBytes[0].Bytes)
	for _, kc := range r.TopBytes {
		if kc.Key == "j" {
			require.Equal(t, uint64(5_000), kc.Bytes, "a bound's lower end: bytes − bytes_error")
		}
	}
}
