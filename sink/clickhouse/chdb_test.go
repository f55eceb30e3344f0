package clickhouse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	chschema "github.com/keyheat/keyheat/schemas/clickhouse"
)

type chdbStep struct {
	SQL    string            `json:"sql"`
	Params map[string]string `json:"params,omitempty"`
	Format string            `json:"format,omitempty"`
}

type chdbResult struct {
	Error *string `json:"error"`
	Out   string  `json:"out"`
}

// runChdb runs steps in one chdb session (testdata/chdb_run.py) and
// returns the engine's version and each step's result.
func runChdb(ctx context.Context, t *testing.T, steps []chdbStep) (string, []chdbResult) {
	t.Helper()
	python := testenv.Python(t, "chdb")
	in, err := json.Marshal(map[string]any{"steps": steps})
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, python, "testdata/chdb_run.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "chdb_run.py: %s (install chdb with scripts/pydeps.sh up)", stderr.String())
	var resp struct {
		Version string       `json:"version"`
		Results []chdbResult `json:"results"`
	}
	require.NoError(t, json.Unmarshal(out, &resp))
	require.Len(t, resp.Results, len(steps))
	return resp.Version, resp.Results
}

// recordBatch stands in for a clickhouse-go batch: it keeps the rows a
// table's append function makes, so they can be sent to chdb as JSON.
type recordBatch struct {
	driver.Batch
	rows [][]any
}

func (b *recordBatch) Append(v ...any) error {
	b.rows = append(b.rows, v)
	return nil
}

// jsonInsert turns the rows the writer would insert into t for items into
// an INSERT … FORMAT JSONEachRow statement.
func jsonInsert(t *testing.T, tb *table, items []*item) string {
	t.Helper()
	var b recordBatch
	for _, it := range items {
		if tb.rows(it) > 0 {
			require.NoError(t, tb.append(&b, it))
		}
	}
	var sb strings.Builder
	sb.WriteString(tb.insertSQL() + " FORMAT JSONEachRow\n")
	for _, row := range b.rows {
		require.Len(t, row, len(tb.columns), tb.name)
		obj := map[string]any{}
		for i, c := range tb.columns {
			v := row[i]
			if tm, ok := v.(time.Time); ok {
				v = tm.Unix()
			}
			obj[c] = v
		}
		line, err := json.Marshal(obj)
		require.NoError(t, err)
		sb.Write(line)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// decodeRows decodes JSONEachRow output into rows of T.
func decodeRows[T any](t *testing.T, out string) []T {
	t.Helper()
	rows := []T{}
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r T
		require.NoError(t, dec.Decode(&r), out)
		rows = append(rows, r)
	}
	return rows
}

// TestChdbCurrentRelease runs the migrations (twice), the retention
// ALTERs and every documented query on a current ClickHouse engine
// (chdb), and checks the queries' answers against the same model as
// TestClickHouseQueries does against 18.16.
func TestChdbCurrentRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testenv.HangGuard)
	defer cancel()
	// Long enough that the fixture's rows (January 2026) outlive it: a
	// current engine drops expired rows as it inserts them.
	const retentionDays = 36500
	migrations, err := chschema.Migrations()
	require.NoError(t, err)

	steps := []chdbStep{
		{SQL: "SET output_format_json_quote_64bit_integers = 0"},
		{SQL: "SET output_format_json_quote_64bit_floats = 0"},
		{SQL: "SET session_timezone = 'UTC'"},
		{SQL: "CREATE DATABASE keyheat"},
		{SQL: "USE keyheat"},
		{SQL: chschema.MigrationsTableDDL},
	}
	// A second start runs them again: IF NOT EXISTS, or an ADD COLUMN
	// whose "already exists" the migration runner takes as done.
	again := map[int]bool{}
	for pass := range 2 {
		for _, m := range migrations {
			for _, s := range m.Statements {
				if pass == 1 && strings.Contains(s, " ADD COLUMN ") {
					again[len(steps)] = true
				}
				steps = append(steps, chdbStep{SQL: s})
			}
		}
	}
	for _, tb := range chschema.Tables() {
		steps = append(steps, chdbStep{SQL: chschema.TTLStatement(tb, retentionDays)})
	}
	engines := len(steps)
	steps = append(steps, chdbStep{SQL: "SELECT name, engine_full FROM system.tables WHERE database = 'keyheat'", Format: "JSONEachRow"})

	f := makeFixture(4, 12, fixtureApps, fixtureBaseMs)
	var items []*item
	for _, r := range f.reports {
		it, err := newReportItem(r, nil)
		require.NoError(t, err)
		items = append(items, it)
	}
	for _, h := range f.hot {
		it, err := newHotItem(h, nil)
		require.NoError(t, err)
		items = append(items, it)
	}
	for range 2 { // everything twice: FINAL must show one row each
		for _, tb := range tables() {
			steps = append(steps, chdbStep{SQL: jsonInsert(t, tb, items)})
		}
	}
	counted := len(steps)
	for _, tb := range tables() {
		steps = append(steps, chdbStep{SQL: "SELECT count() FROM " + tb.name + " FINAL"})
	}

	// The documented queries, with ClickHouse's own parameter binding.
	type check struct {
		step int
		name string
		cmp  func(out string)
	}
	var checks []check
	cur := f.current()
	sec := func(i int) time.Time { return time.UnixMilli(fixtureBaseMs + int64(i)*1000).UTC() }
	add := func(query string, r Range, params map[string]string, cmp func(string)) {
		text, err := chschema.Query(query)
		require.NoError(t, err)
		params["from"] = r.From.Format(time.DateTime)
		params["to"] = r.To.Format(time.DateTime)
		checks = append(checks, check{len(steps), fmt.Sprintf("%s %v", query, params), cmp})
		steps = append(steps, chdbStep{SQL: text, Params: params, Format: "JSONEachRow"})
	}
	for _, r := range []Range{{sec(-5), sec(100)}, {sec(1), sec(6)}} {
		for _, app := range []string{"", "shop"} {
			for _, list := range keyLists {
				add(chschema.QueryTop, r, map[string]string{"app": app, "list": list, "limit": "5"}, func(out string) {
					require.Equal(t, nonNilRows(expectTop(cur, r, app, list, 5)), decodeRows[TopRow](t, out))
				})
			}
			add(chschema.QuerySkew, r, map[string]string{"app": app, "limit": "4"}, func(out string) {
				require.Equal(t, nonNilRows(expectSkew(cur, r, app, 4)), decodeRows[SkewRow](t, out))
			})
			add(chschema.QueryPartitions, r, map[string]string{"app": app}, func(out string) {
				require.Equal(t, nonNilRows(expectPartitions(cur, r, app)), decodeRows[PartitionRow](t, out))
			})
			add(chschema.QueryNodes, r, map[string]string{"app": app}, func(out string) {
				require.Equal(t, nonNilRows(expectNodes(cur, r, app)), decodeRows[NodeRow](t, out))
			})
			add(chschema.QuerySlots, r, map[string]string{"app": app, "limit": "4"}, func(out string) {
				require.Equal(t, nonNilRows(expectSlots(cur, r, app, 4)), decodeRows[SlotRow](t, out))
			})
			for _, order := range KeyOrders() {
				add(chschema.QueryKey, r, map[string]string{"app": app, "key": "key-00", "order": order, "limit": "3"}, func(out string) {
					require.Equal(t, nonNilRows(expectKey(cur, r, app, "key-00", order, 3)), decodeRows[KeyRow](t, out))
				})
			}
			add(chschema.QueryAlerts, r, map[string]string{"app": app, "key": "", "limit": strconv.Itoa(DefaultLimit)}, func(out string) {
				require.Equal(t, nonNilRows(expectAlerts(f, r, app, "")), decodeRows[AlertRow](t, out))
			})
		}
	}

	version, res := runChdb(ctx, t, steps)
	t.Logf("chdb runs ClickHouse %s", version)
	supports, err := chschema.SupportsTTL(version)
	require.NoError(t, err)
	require.True(t, supports, "chdb's engine %s has TTL", version)
	for i, r := range res {
		if again[i] {
			require.NotNil(t, r.Error, "step %d adds a column twice: %s", i, steps[i].SQL)
			require.Contains(t, *r.Error, "DUPLICATE_COLUMN", "step %d: the error the runner takes as done (code %d)", i, codeDuplicateColumn)
			continue
		}
		require.Nil(t, r.Error, "step %d: %s", i, steps[i].SQL)
	}

	type engineRow struct {
		Name   string `json:"name"`
		Engine string `json:"engine_full"`
	}
	engineOf := map[string]string{}
	for _, e := range decodeRows[engineRow](t, res[engines].Out) {
		engineOf[e.Name] = e.Engine
	}
	for _, tb := range chschema.Tables() {
		require.True(t, chschema.TTLApplied(engineOf[tb.Name], tb, retentionDays),
			"%s has the retention TTL: %s", tb.Name, engineOf[tb.Name])
		require.False(t, chschema.TTLApplied(engineOf[tb.Name], tb, retentionDays+1))
	}

	want := f.rows()
	for i, tb := range tables() {
		require.Equal(t, strconv.Itoa(want[tb.name]), strings.TrimSpace(res[counted+i].Out), "logical rows of %s", tb.name)
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.cmp(res[c.step].Out) })
	}
}
