package detect_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// TestSinks: with ClickHouse and the archive on, every report and hot-key
// event reaches ClickHouse (real server) and the archive, and every event
// the archive, before the run commits and ends.
func TestSinks(t *testing.T) {
	conn := testenv.ClickHouseConn(t)
	db := testenv.ClickHouseDatabase(t, conn)
	e := newEnv(t, testenv.KFake(t), 2)
	base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range int64(600) {
			// Hot: two in 10 ms. One hot key per partition: the registry
			// holds one record per app and key, and a key published by
			// two partitions at once (which a keyed topic does not do)
			// could have one's hot between the other's cooled and its
			// tombstone.
			key := "k" + strconv.Itoa(int(p))
			if i%3 == 0 {
				key = "other" + strconv.Itoa(int(p))
			}
			recs = append(recs, event(e.events, p, key, base+i*5))
		}
	}
	n := len(recs)
	produce(t, e.seeds, recs...)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	chOpts := clickhouse.DefaultOptions()
	chOpts.Addr, chOpts.Database, chOpts.FlushInterval = []string{testenv.ClickHouseAddr(t)}, db, 50*time.Millisecond
	ch, err := clickhouse.Open(ctx, chOpts, clickhouse.Deps{Logger: testLogger(t)})
	require.NoError(t, err)
	defer func() { require.NoError(t, ch.Close(context.Background())) }()
	arOpts := archive.DefaultOptions()
	arOpts.Root, arOpts.SegmentAge = t.TempDir(), 200*time.Millisecond
	ar, err := archive.Open(ctx, arOpts, testLogger(t), nil)
	require.NoError(t, err)

	cfg := e.config(t)
	cfg.ExitAtEnd = true
	cfg.ClickHouse, cfg.Archive, cfg.ArchiveFlush = ch, ar, arOpts.SegmentAge
	svc, err := detect.New(cfg)
	require.NoError(t, err)
	require.NoError(t, svc.Run(ctx))
	require.NoError(t, ar.Close())

	reports := readAll(t, e.seeds, e.reports)
	hot := map[string]bool{}
	for _, h := range registryEvents(t, readAll(t, e.seeds, e.hotkeys)) {
		hot[h.ID] = true
	}
	require.NotEmpty(t, hot)
	count := func(table string) uint64 {
		var c uint64
		require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM "+db+"."+table+" FINAL").Scan(&c))
		return c
	}
	require.EqualValues(t, len(reports), count("reports"), "every report in ClickHouse")
	require.EqualValues(t, len(hot), count("hotkey_events"), "every hot-key event in ClickHouse")

	er, err := archive.OpenEvents(ctx, arOpts.Root, archive.Query{}, testLogger(t))
	require.NoError(t, err)
	rows := make([]schemas.EventRow, 256)
	archived := 0
	for {
		k, err := er.Read(rows)
		archived += k
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	require.NoError(t, er.Close())
	require.Equal(t, n, archived, "every event archived")
	fsys, err := archive.NewDirFS(arOpts.Root)
	require.NoError(t, err)
	rs, _, err := archive.ReadReports(ctx, fsys, archive.Query{}, testLogger(t))
	require.NoError(t, err)
	require.Len(t, rs, len(reports), "every report archived")
	hs, _, err := archive.ReadHotKeys(ctx, fsys, archive.Query{}, testLogger(t))
	require.NoError(t, err)
	require.Len(t, hs, len(hot), "every hot-key event archived")
}

// blockingCH is a ClickHouse sink whose buffer is full until opened: it
// refuses reports (after the caller's deadline) and says it is not ready,
// the way a ClickHouse that is down makes the real writer behave.
type blockingCH struct {
	open    chan struct{}
	mu      sync.Mutex
	reports []string
}

func (b *blockingCH) WriteHotKey(_ context.Context, _ *schemas.HotKeyEvent, ack clickhouse.AckFunc) error {
	go ack(nil)
	return nil
}

func (b *blockingCH) WriteReport(ctx context.Context, r *schemas.WindowReport, ack clickhouse.AckFunc) error {
	select {
	case <-b.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	b.reports = append(b.reports, r.ID)
	b.mu.Unlock()
	go ack(nil)
	return nil
}

func (b *blockingCH) Ready() error {
	select {
	case <-b.open:
		return nil
	default:
		return errors.New("clickhouse inserts failing")
	}
}

// TestClickHouseBackpressure: while ClickHouse takes no report, the
// merger keeps its group but commits nothing past the reports it could
// not write, and the service says it is not ready; once ClickHouse takes
// them again, every report is written and the commit moves on.
func TestClickHouseBackpressure(t *testing.T) {
	e := newEnv(t, testenv.KFake(t), 1)
	base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
	var recs []*kgo.Record
	for i := range int64(5) {
		recs = append(recs, event(e.events, 0, "k", base+i*1000))
	}
	produce(t, e.seeds, recs...)
	ch := &blockingCH{open: make(chan struct{})}
	cfg := e.config(t)
	cfg.ClickHouse = ch
	r := start(t, cfg)
	// The first window's reports reach Kafka; ClickHouse has no room for
	// them, so fetching pauses (the later summaries may or may not have
	// been fetched with the first).
	testenv.Eventually(t, "reports on Kafka", func() bool { return len(readAll(t, e.seeds, e.reports)) >= 2 })
	time.Sleep(500 * time.Millisecond) // several commit intervals
	c := committed(t, e.seeds, e.mergeGroup, e.windows)
	require.True(t, len(c) == 0 || c[0].At == 0 && c[0].Metadata == "khm1 done=0",
		"no report in ClickHouse, no merge commit past the first summary: %v", c)
	require.ErrorContains(t, r.svc.Ready(), "clickhouse inserts failing")

	close(ch.open)
	testenv.Eventually(t, "the merge commit past every closed window", func() bool {
		return committed(t, e.seeds, e.mergeGroup, e.windows)[0].Metadata == "khm1 done="+strconv.FormatInt(base+4000, 10)
	})
	require.NoError(t, r.svc.Ready())
	require.NoError(t, r.stop(t))
	ch.mu.Lock()
	defer ch.mu.Unlock()
	require.Len(t, ch.reports, 8, "a cluster and an app report for each of the 4 closed windows")
}
