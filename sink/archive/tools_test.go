package archive_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// toolsPython returns an interpreter that imports duckdb and pyarrow (see
// testenv.Python).
func toolsPython(t *testing.T) string {
	t.Helper()
	return testenv.Python(t, "duckdb", "pyarrow.dataset")
}

// toolsScript reads the archive with DuckDB and pyarrow and prints what
// they found as JSON.
const toolsScript = `
import json, sys
import duckdb
import pyarrow.dataset as ds

root = sys.argv[1]
con = duckdb.connect()
ev = f"read_parquet('{root}/kind=events/**/*.parquet', hive_partitioning = false)"
evh = f"read_parquet('{root}/kind=events/**/*.parquet', hive_partitioning = true)"
out = {}
out["duckdb_rows"] = con.sql(f"SELECT count(*) FROM {ev}").fetchall()[0][0]
out["duckdb_distinct_ids"] = con.sql(
    f"SELECT count(DISTINCT (topic, partition, \"offset\", event_index)) FROM {ev}").fetchall()[0][0]
out["duckdb_multi_records"] = con.sql(
    f"SELECT count(*) FROM (SELECT 1 FROM {ev} GROUP BY topic, partition, \"offset\" HAVING count(*) > 1)").fetchall()[0][0]
out["duckdb_types"] = {r[0]: r[1] for r in con.sql(f"DESCRIBE SELECT * FROM {ev}").fetchall()}
out["duckdb_by_key"] = [list(r) for r in con.sql(
    f"SELECT app, key, count(*), sum(bytes)::BIGINT FROM {ev} GROUP BY app, key ORDER BY app, key").fetchall()]
out["duckdb_by_hive_hour"] = [list(r) for r in con.sql(
    f"SELECT coalesce(app, ''), strftime(dt, '%Y-%m-%d') || ' ' || hour, count(*) FROM {evh} "
    "GROUP BY ALL ORDER BY ALL").fetchall()]
out["duckdb_time_range"] = list(con.sql(f"SELECT epoch_ms(min(time_ms)), epoch_ms(max(time_ms)) FROM {ev}").fetchall()[0])
rep = f"read_parquet('{root}/kind=reports/**/*.parquet', hive_partitioning = false)"
out["duckdb_reports"] = con.sql(f"SELECT count(*), count(DISTINCT id) FROM {rep}").fetchall()[0]
out["duckdb_report_top"] = [list(r) for r in con.sql(
    f"SELECT id, t.key, t.count FROM (SELECT id, unnest(top) AS t FROM {rep}) ORDER BY id").fetchall()]
hk = f"read_parquet('{root}/kind=hotkeys/**/*.parquet', hive_partitioning = false)"
out["duckdb_hotkeys"] = [list(r) for r in con.sql(
    f"SELECT type, count(*) FROM {hk} GROUP BY type ORDER BY type").fetchall()]
out["duckdb_hotkey_bounds"] = [list(r) for r in con.sql(
    f"SELECT error, partitions FROM {hk} WHERE error > 0 ORDER BY onset_ms").fetchall()]

d = ds.dataset(f"{root}/kind=events", format="parquet", partitioning="hive")
out["arrow_rows"] = d.count_rows()
out["arrow_types"] = {f.name: str(f.type) for f in d.schema}
t = d.to_table(columns=["app", "key", "bytes"])
by = {}
for app, key, b in zip(t.column("app").to_pylist(), t.column("key").to_pylist(), t.column("bytes").to_pylist()):
    k = (app or "") + "\x00" + key
    c = by.setdefault(k, [0, 0])
    c[0] += 1
    c[1] += b
out["arrow_by_key"] = by
print(json.dumps(out))
`

type toolsResult struct {
	DuckDBRows      int64             `json:"duckdb_rows"`
	DuckDBDistinct  int64             `json:"duckdb_distinct_ids"`
	DuckDBMulti     int64             `json:"duckdb_multi_records"`
	DuckDBTypes     map[string]string `json:"duckdb_types"`
	DuckDBByKey     [][]any           `json:"duckdb_by_key"`
	DuckDBByHour    [][]any           `json:"duckdb_by_hive_hour"`
	DuckDBTimeRange []int64           `json:"duckdb_time_range"`
	DuckDBReports   []int64           `json:"duckdb_reports"`
	DuckDBReportTop [][]any           `json:"duckdb_report_top"`
	DuckDBHotKeys   [][]any           `json:"duckdb_hotkeys"`
	DuckDBHKBounds  [][]any           `json:"duckdb_hotkey_bounds"`
	ArrowRows       int64             `json:"arrow_rows"`
	ArrowTypes      map[string]string `json:"arrow_types"`
	ArrowByKey      map[string][2]int64
}

func TestReadableByDuckDBAndArrow(t *testing.T) {
	py := toolsPython(t)
	root := t.TempDir()
	a := openArchive(t, testOptions(root))
	apps := []string{"shop", "", "a/b c%", "käse"}
	type agg struct{ count, bytes int64 }
	byKey := map[[2]string]*agg{}
	byHour := map[[2]string]int64{}
	var total, multi int64
	minMs, maxMs := int64(1<<62), int64(-1<<62)
	for p := int32(0); p < 2; p++ {
		w, err := a.Partition(context.Background(), testTopic, p, 0)
		require.NoError(t, err)
		ins := genEvents(p, 2500, apps, 4_000)
		appendAll(t, w, ins, ins[len(ins)-1].offset+1)
		for _, r := range records(ins) {
			if len(r.evs) > 1 {
				multi++
			}
		}
		for _, in := range ins {
			k := [2]string{in.ev.App, in.ev.Key}
			if byKey[k] == nil {
				byKey[k] = &agg{}
			}
			byKey[k].count++
			byKey[k].bytes += in.ev.Bytes
			hour := time.UnixMilli(in.ev.TimeMs).UTC().Format("2006-01-02 15")
			byHour[[2]string{in.ev.App, hour}]++
			total++
			minMs, maxMs = min(minMs, in.ev.TimeMs), max(maxMs, in.ev.TimeMs)
		}
	}
	rw, err := a.Reports("merger")
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, rw.Append(report(schemas.ScopeCluster, "", baseMs+int64(i)*1000)))
		require.NoError(t, rw.Append(report(schemas.ScopeApp, "shop", baseMs+int64(i)*1000)))
	}
	hw, err := a.HotKeys("keyheat.events-3")
	require.NoError(t, err)
	for i := range 4 {
		typ := schemas.HotKeyHot
		if i%2 == 1 {
			typ = schemas.HotKeyCooled
		}
		h := hotKey("shop", "product:42", baseMs+int64(i)*10_000, typ)
		if i == 0 {
			h.Partition, h.Partitions, h.Error = schemas.ClusterPartition, []int32{0, 2, 5}, 91
			h.ID = schemas.HotKeyID(testTopic, h.Partition, h.Rule, typ, h.App, h.Key, h.OnsetMs)
		}
		require.NoError(t, hw.Append(h))
	}
	require.NoError(t, a.Close())

	cmd := exec.Command(py, "-c", toolsScript, root)
	cmd.Stderr = os.Stderr
	outb, err := cmd.Output()
	require.NoError(t, err, "python reading the archive")
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(outb, &raw))
	var got toolsResult
	require.NoError(t, json.Unmarshal(outb, &got))
	var arrowBy map[string][2]int64
	require.NoError(t, json.Unmarshal(raw["arrow_by_key"], &arrowBy))

	// Row counts.
	require.Equal(t, total, got.DuckDBRows, "DuckDB row count")
	require.Equal(t, total, got.ArrowRows, "pyarrow row count")
	require.Equal(t, total, got.DuckDBDistinct, "(topic, partition, offset, event_index) identifies a row")
	require.Equal(t, multi, got.DuckDBMulti, "records archived with several events")

	// Column types, as each tool sees them.
	for col, typ := range map[string]string{
		"time_ms": "TIMESTAMP WITH TIME ZONE", "app": "VARCHAR", "key": "VARCHAR", "op": "VARCHAR",
		"bytes": "BIGINT", "status": "INTEGER", "client": "VARCHAR", "node": "VARCHAR",
		"latency_us": "BIGINT", "topic": "VARCHAR", "partition": "INTEGER", "offset": "BIGINT",
		"event_index": "INTEGER",
	} {
		require.Equal(t, typ, got.DuckDBTypes[col], "DuckDB type of %s", col)
	}
	require.Len(t, got.DuckDBTypes, 13, "DuckDB columns without hive partitioning: %v", got.DuckDBTypes)
	for col, typ := range map[string]string{
		"time_ms": "timestamp[ms, tz=UTC]", "key": "string", "bytes": "int64", "status": "int32",
		"partition": "int32", "offset": "int64", "event_index": "int32", "dt": "string", "hour": "int32",
	} {
		require.Equal(t, typ, got.ArrowTypes[col], "pyarrow type of %s", col)
	}
	require.Equal(t, []int64{minMs, maxMs}, got.DuckDBTimeRange, "time_ms holds the exact millisecond")

	// GROUP BY app, key against keyheat's own counts.
	require.Len(t, got.DuckDBByKey, len(byKey), "DuckDB groups")
	for _, r := range got.DuckDBByKey {
		k := [2]string{r[0].(string), r[1].(string)}
		require.NotNil(t, byKey[k], "DuckDB group %q", k)
		require.Equal(t, byKey[k].count, int64(r[2].(float64)), "DuckDB count of %q", k)
		require.Equal(t, byKey[k].bytes, int64(r[3].(float64)), "DuckDB sum(bytes) of %q", k)
	}
	require.Len(t, arrowBy, len(byKey), "pyarrow groups")
	for k, v := range byKey {
		require.Equal(t, [2]int64{v.count, v.bytes}, arrowBy[k[0]+"\x00"+k[1]], "pyarrow count and bytes of %q", k)
	}

	// Hive folders: app, dt and hour read back from the paths (the empty
	// app as NULL), matching event time.
	require.Len(t, got.DuckDBByHour, len(byHour), "DuckDB groups by hive app, dt, hour")
	for _, r := range got.DuckDBByHour {
		k := [2]string{r[0].(string), r[1].(string)}
		require.Equal(t, byHour[k], int64(r[2].(float64)), "DuckDB count of folder %q", k)
	}

	// Reports and hot keys.
	require.Equal(t, []int64{10, 10}, got.DuckDBReports, "reports and distinct ids")
	require.Len(t, got.DuckDBReportTop, 10, "one top entry per report")
	require.Equal(t, "product:42", got.DuckDBReportTop[0][1])
	require.Equal(t, [][]any{{"cooled", float64(2)}, {"hot", float64(2)}}, got.DuckDBHotKeys, "hot-key events by type")
	require.Equal(t, [][]any{{float64(91), []any{float64(0), float64(2), float64(5)}}}, got.DuckDBHKBounds,
		"a cluster alert's error and partitions list")
}
