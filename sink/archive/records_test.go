package archive_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

var errEOF = io.EOF

func report(scope, app string, startMs int64) *schemas.WindowReport {
	return &schemas.WindowReport{
		Version: schemas.ReportVersion, ID: schemas.WindowReportID(scope, app, startMs), Scope: scope, App: app,
		StartMs: startMs, EndMs: startMs + 1000, Topics: []string{testTopic}, Events: 1000, Bytes: 5000,
		Reads: 900, Writes: 100, LatencyUs: 77, Distinct: 40, Keyed: true,
		Top: []schemas.KeyCount{{App: "shop", Key: "product:42", Count: 600, Bytes: 3000, Reads: 590, Writes: 10, Partition: 3, Share: 0.6}},
		Skew: schemas.Skew{Partitions: []schemas.PartitionLoad{{Topic: testTopic, Partition: 3, Events: 1000, Share: 1}},
			MaxMean: 1, Top1Share: 0.6, Top10Share: 0.9,
			Nodes: []schemas.NodeLoad{{Node: "shard-0", FirstSlot: 0, LastSlot: 16383, Events: 1000, Share: 1}}},
		Advice: []schemas.KeyAdvice{{App: "shop", Key: "product:42", Rate: 600, ReadShare: 0.98,
			Mitigation: schemas.Mitigation{Kind: schemas.MitigationLocalCache}}},
	}
}

func hotKey(app, key string, onsetMs int64, typ string) *schemas.HotKeyEvent {
	h := &schemas.HotKeyEvent{
		Version: schemas.HotKeyVersion, ID: schemas.HotKeyID(testTopic, 3, "r", typ, app, key, onsetMs), Type: typ,
		App: app, Key: key, KeyHash: "9f1c0a4b5e6d7c8a", Rule: "r", Rate: 1234.5, Threshold: 1000, Count: 1235,
		WindowMs: 1000, Topic: testTopic, Partition: 3, OnsetMs: onsetMs, DetectedMs: onsetMs + 8,
		Reads: 1200, Writes: 35, Bytes: 99999,
	}
	if typ == schemas.HotKeyHot {
		h.Mitigation = &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 4}
	}
	return h
}

// normalize returns what a JSON round trip makes of r (nil and empty
// slices are one thing on the wire).
func normalize(t *testing.T, r *schemas.WindowReport) *schemas.WindowReport {
	b, err := r.AppendJSON(nil)
	require.NoError(t, err)
	out, err := schemas.DecodeWindowReport(b)
	require.NoError(t, err)
	return out
}

func TestReportsRoundTripAndDedupe(t *testing.T) {
	root := t.TempDir()
	a := openArchive(t, testOptions(root))
	w, err := a.Reports("merger")
	require.NoError(t, err)
	var want []*schemas.WindowReport
	for i := range 10 {
		start := baseMs + int64(i)*hourMs/4 // over three hours
		for _, r := range []*schemas.WindowReport{report(schemas.ScopeCluster, "", start), report(schemas.ScopeApp, "shop", start), report(schemas.ScopeApp, "a/b", start)} {
			require.NoError(t, w.Append(r))
			want = append(want, normalize(t, r))
		}
		if i == 4 {
			require.NoError(t, w.Flush(context.Background()))
		}
	}
	// A restart re-emits the last three windows: same IDs.
	for i := 7; i < 10; i++ {
		require.NoError(t, w.Append(report(schemas.ScopeCluster, "", baseMs+int64(i)*hourMs/4)))
	}
	require.NoError(t, w.Close())
	require.NoError(t, w.Close(), "second close")
	require.NoError(t, a.Close())

	fsys, err := archive.NewDirFS(root)
	require.NoError(t, err)
	got, skipped, err := archive.ReadReports(context.Background(), fsys, archive.Query{}, nil)
	require.NoError(t, err)
	require.Empty(t, skipped)
	sortReports(want)
	require.Equal(t, want, got, "every report once, exactly, by start then ID")

	got, _, err = archive.ReadReports(context.Background(), fsys, archive.Query{Apps: []string{""}, FromMs: baseMs + hourMs}, nil)
	require.NoError(t, err)
	require.Len(t, got, 6, "cluster reports from the second hour on")
	for _, r := range got {
		require.Equal(t, schemas.ScopeCluster, r.Scope)
	}
}

func sortReports(rs []*schemas.WindowReport) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && (rs[j].StartMs < rs[j-1].StartMs || rs[j].StartMs == rs[j-1].StartMs && rs[j].ID < rs[j-1].ID); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func TestHotKeysRoundTrip(t *testing.T) {
	root := t.TempDir()
	opts := testOptions(root)
	opts.RecordRows = 7 // several rolls
	a := openArchive(t, opts)
	w, err := a.HotKeys("keyheat.events-3")
	require.NoError(t, err)
	var want []*schemas.HotKeyEvent
	for i := range 30 {
		typ := schemas.HotKeyHot
		if i%3 == 2 {
			typ = schemas.HotKeyCooled
		}
		h := hotKey([]string{"shop", "ads"}[i%2], fmt.Sprintf("product:%d", i%5), baseMs+int64(i)*600_000, typ)
		require.NoError(t, w.Append(h))
		want = append(want, h)
	}
	require.NoError(t, a.Close())
	fsys, err := archive.NewDirFS(root)
	require.NoError(t, err)
	got, _, err := archive.ReadHotKeys(context.Background(), fsys, archive.Query{}, nil)
	require.NoError(t, err)
	require.Equal(t, want, got, "every hot-key event exactly, by onset")

	got, _, err = archive.ReadHotKeys(context.Background(), fsys, archive.Query{KeyPrefix: "product:3", Apps: []string{"ads"}}, nil)
	require.NoError(t, err)
	for _, h := range got {
		require.Equal(t, "ads", h.App)
		require.Equal(t, "product:3", h.Key)
	}
	require.Len(t, got, 3)
}

// TestHotKeysBoundsRoundTrip: a cluster alert's partitions and error and
// a partition alert's error come back from the archive exactly.
func TestHotKeysBoundsRoundTrip(t *testing.T) {
	root := t.TempDir()
	a := openArchive(t, testOptions(root))
	w, err := a.HotKeys("cluster")
	require.NoError(t, err)
	part := hotKey("shop", "product:1", baseMs, schemas.HotKeyHot)
	part.Error = 17
	cluster := hotKey("shop", "product:2", baseMs+1, schemas.HotKeyHot)
	cluster.Partition, cluster.Partitions, cluster.Error = schemas.ClusterPartition, []int32{0, 2, 5}, 91
	cluster.ID = schemas.HotKeyID(testTopic, schemas.ClusterPartition, "r", schemas.HotKeyHot, "shop", "product:2", baseMs+1)
	cooled := hotKey("shop", "product:1", baseMs+2, schemas.HotKeyCooled)
	for _, h := range []*schemas.HotKeyEvent{part, cluster, cooled} {
		require.NoError(t, w.Append(h))
	}
	require.NoError(t, a.Close())
	fsys, err := archive.NewDirFS(root)
	require.NoError(t, err)
	got, _, err := archive.ReadHotKeys(context.Background(), fsys, archive.Query{}, nil)
	require.NoError(t, err)
	require.Equal(t, []*schemas.HotKeyEvent{part, cluster, cooled}, got, "bounds archived; no partitions read back as nil")
}
