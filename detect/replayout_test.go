package detect_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// printed is a ReplayTo.Print that keeps what it heard.
type printed struct{ hot, reports []string }

func (p *printed) HotKey(h *schemas.HotKeyEvent) error { p.hot = append(p.hot, h.ID); return nil }
func (p *printed) Report(r *schemas.WindowReport) error {
	p.reports = append(p.reports, r.ID)
	return nil
}

func replayOutputs(base int64) (*schemas.HotKeyEvent, *schemas.WindowReport) {
	h := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: "h1", Type: schemas.HotKeyHot, App: "a", Key: "k",
		Rule: "r", Rate: 10, Threshold: 5, Topic: "t", OnsetMs: base, DetectedMs: base}
	r := &schemas.WindowReport{Version: schemas.ReportVersion, ID: "cluster/1", Scope: schemas.ScopeCluster,
		StartMs: base, EndMs: base + 1000, Events: 3}
	return h, r
}

// TestReplayOutputsArchive: the printer hears every output, and the
// archive's writers have made them durable once Close returns.
func TestReplayOutputsArchive(t *testing.T) {
	ctx := context.Background()
	opts := archive.DefaultOptions()
	opts.Root = t.TempDir()
	a, err := archive.Open(ctx, opts, testLogger(t), nil)
	require.NoError(t, err)
	reps, err := a.Reports("replay")
	require.NoError(t, err)
	hot, err := a.HotKeys("replay")
	require.NoError(t, err)
	p := &printed{}
	o := detect.NewReplayOutputs(ctx, detect.ReplayTo{Print: p, Archive: a, Reports: reps, HotKeys: hot, ArchiveName: "--out-parquet"})
	h, r := replayOutputs(time.Now().Add(-time.Hour).UnixMilli())
	require.NoError(t, o.HotKey(h))
	require.NoError(t, o.Report(r))
	require.Equal(t, &printed{hot: []string{"h1"}, reports: []string{"cluster/1"}}, p)
	require.NoError(t, o.Close(ctx, time.Minute))
	var files []string
	require.NoError(t, filepath.WalkDir(opts.Root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".parquet") {
			rel, _ := filepath.Rel(opts.Root, path)
			files = append(files, strings.SplitN(rel, string(filepath.Separator), 2)[0])
		}
		return err
	}))
	require.ElementsMatch(t, []string{"kind=hotkeys", "kind=reports"}, files, "parquet files, by kind")
}

// TestReplayOutputsClickHouseUnacknowledged: outputs ClickHouse took and
// never wrote (its server went away) fail the replay at Close, with the
// writer's acknowledgement: a replay never ends well with rows missing.
func TestReplayOutputsClickHouseUnacknowledged(t *testing.T) {
	srv := testenv.PrivateClickHouse(t)
	ctx := context.Background()
	chOpts := clickhouse.DefaultOptions()
	chOpts.Addr, chOpts.FlushInterval = []string{srv.Addr()}, 50*time.Millisecond
	ch, err := clickhouse.Open(ctx, chOpts, clickhouse.Deps{Logger: testLogger(t)})
	require.NoError(t, err)
	srv.Stop(t)
	o := detect.NewReplayOutputs(ctx, detect.ReplayTo{ClickHouse: ch})
	h, r := replayOutputs(time.Now().Add(-time.Hour).UnixMilli())
	require.NoError(t, o.HotKey(h), "taken into the writer's buffer")
	require.NoError(t, o.Report(r), "taken into the writer's buffer")
	// Close gives up on the stopped server after a second, and
	// acknowledges the two rows with ErrClosed.
	err = o.Close(ctx, time.Second)
	require.ErrorIs(t, err, clickhouse.ErrClosed, "the failed acknowledgements")
	require.ErrorContains(t, err, "replay: ")
	require.ErrorContains(t, err, "clickhouse: ")
}
