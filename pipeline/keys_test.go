package pipeline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// hotLongKey runs a hot key of n bytes (a thousand events in 100 ms, over
// the default rule's 1000/s) through one partition with options o and
// returns the key, the partition's output and the merged report.
func hotLongKey(t *testing.T, o Options, n int) (string, Output, schemas.WindowReport) {
	t.Helper()
	key := "tenant:" + strings.Repeat("x", n-len("tenant:"))
	require.NoError(t, schemas.DefaultLimits().Validate(&schemas.AccessEvent{Key: key, TimeMs: t0Ms}, t0Ms), "ingest accepts the key")
	p := newPart(t, o, testSource, Start{})
	var out Output
	for i := range 1000 {
		p.Process(&schemas.AccessEvent{TimeMs: t0Ms + int64(i)/10, App: "shop", Key: key, Op: "GET", Bytes: 10}, int64(i), &out)
	}
	p.End(&out)
	require.NotEmpty(t, out.HotKeys, "the key turned hot")
	cfg := MergerConfig{MergerOptions: DefaultMergerOptions(), Window: o.Window, Lateness: o.Lateness,
		Topics: map[string]int32{testSource.Topic: 1}}
	w := out.Windows[0]
	w.Partitions, w.Partition, w.ID = 1, 0, schemas.PartitionWindowID(w.Topic, 0, w.StartMs)
	got := mergeInOrder(t, cfg, []*schemas.PartitionWindow{&w})
	require.Len(t, got, 1)
	return key, out, got[0].Reports[0]
}

// Every key ingest accepts (up to events.max_key_bytes, 1 KiB by default)
// is reported whole by default: a hot 999-byte key keeps its name in the
// summary, the report and the hot-key event.
func TestLongKeyReportedWhole(t *testing.T) {
	key, out, r := hotLongKey(t, DefaultOptions(), 999)
	require.Equal(t, key, out.Windows[0].Apps[0].Top[0].Key)
	require.False(t, out.Windows[0].Apps[0].Top[0].Shortened)
	require.Equal(t, key, r.Top[0].Key)
	require.False(t, r.Top[0].Shortened)
	require.Equal(t, key, out.HotKeys[0].Key)
	require.False(t, out.HotKeys[0].Shortened)
	require.GreaterOrEqual(t, DefaultOptions().MaxKeyBytes, schemas.DefaultMaxKeyBytes, "pipeline.max_key_bytes covers events.max_key_bytes")
}

// A key over an explicit pipeline.max_key_bytes is reported as its prefix,
// "…" and a hash, and everything that names it says it was shortened.
func TestLongKeyShortenedOverLimit(t *testing.T) {
	o := DefaultOptions()
	o.MaxKeyBytes = 256
	key, out, r := hotLongKey(t, o, 999)
	short := truncateKey(key, 256)
	top := out.Windows[0].Apps[0].Top[0]
	require.Equal(t, short, top.Key)
	require.True(t, top.Shortened, "the summary says the key was shortened")
	require.True(t, out.Windows[0].Apps[0].Big[0].Shortened)
	require.Equal(t, short, r.Top[0].Key)
	require.True(t, r.Top[0].Shortened, "the report says so")
	require.True(t, r.TopBytes[0].Shortened)
	require.Equal(t, short, out.HotKeys[0].Key)
	require.True(t, out.HotKeys[0].Shortened, "the hot-key event says so")
	for _, h := range out.HotKeys {
		require.True(t, h.Shortened, "%s event", h.Type)
	}
}
