package clickhouse

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keyheat/keyheat/internal/testenv"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	chschema "github.com/keyheat/keyheat/schemas/clickhouse"
)

func TestOptionsValidate(t *testing.T) {
	require.NoError(t, DefaultOptions().Validate(), "defaults")
	tests := []struct {
		name  string
		edit  func(*Options)
		wants []string
	}{
		{"no addr", func(o *Options) { o.Addr = nil }, []string{"clickhouse.addr: must not be empty"}},
		{"empty addr", func(o *Options) { o.Addr = []string{""} }, []string{"clickhouse.addr: empty address"}},
		{"bad database", func(o *Options) { o.Database = "a-b" }, []string{"clickhouse.database:"}},
		{"database starts with digit", func(o *Options) { o.Database = "1db" }, []string{"clickhouse.database:"}},
		{"no dial timeout", func(o *Options) { o.DialTimeout = 0 }, []string{"clickhouse.dial_timeout:"}},
		{"no batch", func(o *Options) { o.BatchRows = 0 }, []string{"clickhouse.batch_rows:"}},
		{"no interval", func(o *Options) { o.FlushInterval = 0 }, []string{"clickhouse.flush_interval:"}},
		{"bound below batch", func(o *Options) { o.MaxBufferedRows = o.BatchRows - 1 }, []string{"clickhouse.max_buffered_rows:"}},
		{"no insert timeout", func(o *Options) { o.InsertTimeout = 0 }, []string{"clickhouse.insert_timeout:"}},
		{"no retry min", func(o *Options) { o.RetryMin = 0 }, []string{"clickhouse.retry_min:"}},
		{"retry max below min", func(o *Options) { o.RetryMax = o.RetryMin / 2 }, []string{"clickhouse.retry_max:"}},
		{"negative retention", func(o *Options) { o.RetentionDays = -1 }, []string{"clickhouse.retention_days:"}},
		{"two problems at once", func(o *Options) { o.Addr = nil; o.BatchRows = 0 },
			[]string{"clickhouse.addr:", "clickhouse.batch_rows:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			tt.edit(&o)
			err := o.Validate()
			require.Error(t, err)
			for _, w := range tt.wants {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestItemValidation(t *testing.T) {
	good := func() *schemas.WindowReport {
		return &schemas.WindowReport{Version: 1, ID: "cluster/1000", Scope: schemas.ScopeCluster, StartMs: 1000, EndMs: 2000}
	}
	reports := []struct {
		name string
		edit func(*schemas.WindowReport)
		want string
	}{
		{"no id", func(r *schemas.WindowReport) { r.ID = "" }, "empty id"},
		{"bad scope", func(r *schemas.WindowReport) { r.Scope = "shard" }, "scope"},
		{"before 1970", func(r *schemas.WindowReport) { r.StartMs = -1 }, "start_ms"},
		{"after 2106", func(r *schemas.WindowReport) { r.StartMs = maxDateTimeMs + 1 }, "start_ms"},
		{"list too long", func(r *schemas.WindowReport) { r.TopBytes = make([]schemas.KeyCount, 1<<16) }, "top list"},
		{"too many slots", func(r *schemas.WindowReport) { r.Skew.HotSlots = make([]schemas.SlotCount, 1<<16) }, "hot slots"},
		{"more guaranteed than listed", func(r *schemas.WindowReport) { r.Guaranteed = 1 }, "guaranteed"},
		{"negative guaranteed", func(r *schemas.WindowReport) { r.Guaranteed = -1 }, "guaranteed"},
		{"negative split", func(r *schemas.WindowReport) {
			r.Advice = []schemas.KeyAdvice{{Key: "k", Mitigation: schemas.Mitigation{Split: -1}}}
		}, "split"},
	}
	for _, tt := range reports {
		t.Run("report/"+tt.name, func(t *testing.T) {
			r := good()
			tt.edit(r)
			_, err := newReportItem(r, nil)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err := newReportItem(good(), nil)
	require.NoError(t, err)
	_, err = newReportItem(nil, nil)
	require.Error(t, err)

	hot := func() *schemas.HotKeyEvent {
		return &schemas.HotKeyEvent{Version: 1, ID: "x", Type: schemas.HotKeyHot, OnsetMs: 5}
	}
	hots := []struct {
		name string
		edit func(*schemas.HotKeyEvent)
		want string
	}{
		{"no id", func(h *schemas.HotKeyEvent) { h.ID = "" }, "empty id"},
		{"bad type", func(h *schemas.HotKeyEvent) { h.Type = "warm" }, "type"},
		{"before 1970", func(h *schemas.HotKeyEvent) { h.OnsetMs = -5 }, "onset_ms"},
		{"split too big", func(h *schemas.HotKeyEvent) { h.Mitigation = &schemas.Mitigation{Split: 1 << 33} }, "split"},
	}
	for _, tt := range hots {
		t.Run("hot/"+tt.name, func(t *testing.T) {
			h := hot()
			tt.edit(h)
			_, err := newHotItem(h, nil)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err = newHotItem(hot(), nil)
	require.NoError(t, err)
	_, err = newHotItem(nil, nil)
	require.Error(t, err)
}

// TestItemRows checks that an item's row count, which the buffer bound is
// kept in, is the rows the tables make of it.
func TestItemRows(t *testing.T) {
	f := makeFixture(9, 6, fixtureApps, fixtureBaseMs)
	for _, r := range f.reports {
		it, err := newReportItem(r, nil)
		require.NoError(t, err)
		sum := 0
		for _, tb := range tables() {
			sum += tb.rows(it)
		}
		require.Equal(t, sum, it.rows, "report %s", r.ID)
	}
	it, err := newHotItem(f.hot[0], nil)
	require.NoError(t, err)
	require.Equal(t, 1, it.rows)
}

// TestRowIDs checks that ids are unique within a report version, and
// that a partial version's ids differ from the complete one's.
func TestRowIDs(t *testing.T) {
	f := makeFixture(5, 6, fixtureApps, fixtureBaseMs)
	seen := map[string]string{}
	for _, r := range f.reports {
		rev := reportRev(r)
		require.Equal(t, r.Partial, rev != 0, "rev of %s (partial %v)", r.ID, r.Partial)
		var ids []string
		for li, name := range []string{"events", "bytes", "reads", "writes", "latency"} {
			l := [][]schemas.KeyCount{r.Top, r.TopBytes, r.TopReads, r.TopWrites, r.TopLatency}[li]
			for _, k := range l {
				ids = append(ids, detailID(r, rev, name, appKey(k.App, k.Key)))
			}
		}
		for _, id := range ids {
			if prev, ok := seen[id]; ok {
				require.Equal(t, r.ID, prev, "id %s in two reports", id)
			}
			seen[id] = r.ID
		}
		require.Len(t, slices.Compact(slices.Sorted(slices.Values(ids))), len(ids), "ids of %s", r.ID)
	}
	a := &schemas.WindowReport{Partial: true, Missing: []string{"t/1", "t/2"}}
	b := &schemas.WindowReport{Partial: true, Missing: []string{"t/2", "t/1"}}
	c := &schemas.WindowReport{Partial: true, Missing: []string{"t/1"}}
	require.Equal(t, reportRev(a), reportRev(b), "rev ignores the order of missing partitions")
	require.NotEqual(t, reportRev(a), reportRev(c))
	require.NotEqual(t, appKey("a", "b/c"), appKey("a/b", "c"), "app and key stay apart")
}

func TestBackoff(t *testing.T) {
	minWait, maxWait := 100*time.Millisecond, 10*time.Second
	for attempt := range 100 {
		ceil := min(maxWait, minWait<<min(attempt, 20))
		for range 50 {
			d := backoff(minWait, maxWait, attempt)
			require.GreaterOrEqual(t, d, ceil/2, "attempt %d", attempt)
			require.LessOrEqual(t, d, ceil, "attempt %d", attempt)
		}
	}
	require.LessOrEqual(t, backoff(time.Hour, 2*time.Hour, 1000), 2*time.Hour, "no overflow")
}

func TestBindQuery(t *testing.T) {
	// What the Client passes for each query: every declared parameter,
	// nothing else.
	args := map[string]map[string]any{
		chschema.QueryTop:        {"app": "", "list": "events", "limit": uint32(1)},
		chschema.QuerySkew:       {"app": "", "limit": uint32(1)},
		chschema.QueryPartitions: {"app": ""},
		chschema.QueryNodes:      {"app": ""},
		chschema.QuerySlots:      {"app": "", "limit": uint32(1)},
		chschema.QueryKey:        {"app": "", "key": "k", "order": KeyOrderRecent, "limit": uint32(1)},
		chschema.QueryAlerts:     {"app": "", "key": "", "limit": uint32(1)},
	}
	require.ElementsMatch(t, chschema.QueryNames(), slices.Collect(maps.Keys(args)), "every query has a Go caller")
	for name, a := range args {
		a["from"], a["to"] = time.Unix(0, 0), time.Unix(1, 0)
		bound, named, err := bindQuery(name, a)
		require.NoError(t, err, name)
		require.Len(t, named, len(a), name)
		require.NotContains(t, bound, "{", "%s: a parameter left unbound", name)
		require.NotContains(t, bound, "--", "%s: comments go (the driver would read @ in them)", name)
		delete(a, "limit")
		if _, _, err := bindQuery(name, a); name != chschema.QueryPartitions && name != chschema.QueryNodes {
			require.ErrorContains(t, err, "no value for parameter limit", name)
		}
		a["extra"] = 1
		_, _, err = bindQuery(name, a)
		require.Error(t, err, "%s: an unknown parameter", name)
	}
	_, _, err := bindQuery("nope", map[string]any{})
	require.ErrorContains(t, err, "known:")
}

func TestInsertSQL(t *testing.T) {
	for _, tb := range tables() {
		sql := tb.insertSQL()
		require.True(t, strings.HasPrefix(sql, "INSERT INTO "+tb.name+" (id, "), sql)
		require.Equal(t, "id", tb.columns[0], "%s: id first", tb.name)
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := t.Context()
	bad := DefaultOptions()
	bad.BatchRows = 0
	_, err := Open(ctx, bad, Deps{})
	require.ErrorContains(t, err, "clickhouse.batch_rows")

	// Nothing listens on a port just released.
	o := DefaultOptions()
	o.Addr = []string{fmt.Sprintf("127.0.0.1:%d", testenv.FreePorts(t, 1)[0])}
	o.DialTimeout = time.Second
	_, err = Open(ctx, o, Deps{})
	require.ErrorContains(t, err, "is it running")
	_, err = Connect(ctx, o)
	require.ErrorContains(t, err, "is it running")
}

// TestConnectSaysWhatTheServerSaid: when the server answers with an error
// (here: no such database), the error is the server's, without the advice
// meant for a server that does not answer.
func TestConnectSaysWhatTheServerSaid(t *testing.T) {
	o := testOptions(testenv.ClickHouseAddr(t), "keyheat_no_such_database")
	o.DialTimeout = 5 * time.Second
	_, err := Connect(t.Context(), o)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "is it running")
	require.Contains(t, err.Error(), "keyheat_no_such_database")
}
