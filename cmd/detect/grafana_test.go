package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
)

// The Grafana board of deploy/grafana checked against the binary: every
// metric a panel queries must be on a real detect's /metrics, so that a
// renamed or dropped metric fails here instead of leaving an operator a
// panel with no data.

// boardFile is the dashboard, relative to this package.
const boardFile = "../../deploy/grafana/keyheat.json"

// notServed are metrics the board queries that detect does not serve
// yet: none now. The test requires an entry here absent from /metrics,
// so that the day detect serves it the test fails and the entry goes.
var notServed = map[string]bool{}

// boardPanel is what the test reads of a panel: rows nest theirs when
// collapsed.
type boardPanel struct {
	ID         int          `json:"id"`
	Type       string       `json:"type"`
	Title      string       `json:"title"`
	Datasource *boardDS     `json:"datasource"`
	Targets    []boardQuery `json:"targets"`
	Panels     []boardPanel `json:"panels"`
}

type boardDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type boardQuery struct {
	Expr       string   `json:"expr"`
	Datasource *boardDS `json:"datasource"`
}

type board struct {
	SchemaVersion int          `json:"schemaVersion"`
	Panels        []boardPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// query is one PromQL expression of the board and where it is.
type query struct {
	where string // "panel <title>" or "variable <name>"
	expr  string
}

func loadBoard(t testing.TB) (*board, []query) {
	t.Helper()
	b, err := os.ReadFile(boardFile)
	require.NoError(t, err)
	var bd board
	require.NoError(t, json.Unmarshal(b, &bd), "%s is not JSON a dashboard decodes from", boardFile)
	var qs []query
	var walk func(ps []boardPanel)
	walk = func(ps []boardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				qs = append(qs, query{where: "panel " + p.Title, expr: tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(bd.Panels)
	for _, v := range bd.Templating.List {
		if v.Type != "query" {
			continue
		}
		// A variable's query is a string in older boards, an object
		// with a query field in newer ones.
		var s string
		if json.Unmarshal(v.Query, &s) != nil {
			var o struct{ Query string }
			require.NoError(t, json.Unmarshal(v.Query, &o), "variable %s", v.Name)
			s = o.Query
		}
		qs = append(qs, query{where: "variable " + v.Name, expr: s}, query{where: "variable " + v.Name, expr: v.Definition})
	}
	return &bd, qs
}

// metricRef matches a metric name of ours, or of the Go client's
// collectors, in PromQL, with its selector when it has one. Not a PromQL
// parser: the board's expressions name metrics only as selectors.
var metricRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9_:$])((?:keyheat|process|go)_[A-Za-z0-9_:]+)(\{[^}]*\})?`)

// boardMetrics returns the metric names the queries use, each with the
// places that use it.
func boardMetrics(qs []query) map[string][]string {
	out := map[string][]string{}
	for _, q := range qs {
		for _, m := range metricRef.FindAllStringSubmatch(q.expr, -1) {
			if !slices.Contains(out[m[1]], q.where) {
				out[m[1]] = append(out[m[1]], q.where)
			}
		}
	}
	return out
}

// TestBoardShape: the board is a dashboard Grafana imports with the data
// source asked for, every panel queries it through the datasource
// variable, and every metric selector of a panel is filtered by the
// instance variable.
func TestBoardShape(t *testing.T) {
	bd, qs := loadBoard(t)
	require.GreaterOrEqual(t, bd.SchemaVersion, 36, "schemaVersion")
	vars := map[string]string{}
	for _, v := range bd.Templating.List {
		vars[v.Name] = v.Type
	}
	require.Equal(t, map[string]string{"datasource": "datasource", "instance": "query"}, vars)
	raw, err := os.ReadFile(boardFile)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"${DS_PROMETHEUS}"`, "the import asks for the Prometheus data source")

	ids := map[int]string{}
	var walk func(ps []boardPanel)
	walk = func(ps []boardPanel) {
		for _, p := range ps {
			require.NotContains(t, ids, p.ID, "panel %q has the id of %q", p.Title, ids[p.ID])
			ids[p.ID] = p.Title
			if p.Type != "row" {
				require.NotEmpty(t, p.Targets, "panel %q queries nothing", p.Title)
				require.Equal(t, &boardDS{Type: "prometheus", UID: "${datasource}"}, p.Datasource, "panel %q", p.Title)
			}
			for _, tg := range p.Targets {
				require.Equal(t, &boardDS{Type: "prometheus", UID: "${datasource}"}, tg.Datasource, "panel %q", p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(bd.Panels)
	n := 0
	for _, q := range qs {
		if !strings.HasPrefix(q.where, "panel ") {
			continue
		}
		refs := metricRef.FindAllStringSubmatch(q.expr, -1)
		require.NotEmpty(t, refs, "%s: %q names no metric", q.where, q.expr)
		for _, m := range refs {
			n++
			require.Contains(t, m[2], `instance=~"$instance"`, "%s: %s not filtered by instance", q.where, m[1])
		}
	}
	require.Greater(t, n, 40, "metric selectors on the board")
}

// TestMetricRef: the scan finds names in selectors, bare, in functions
// and in histogram suffixes, and not in Grafana's variables.
func TestMetricRef(t *testing.T) {
	got := boardMetrics([]query{
		{"a", `histogram_quantile(0.99, sum by (le) (rate(keyheat_api_request_duration_seconds_bucket{instance=~"$instance"}[$__rate_interval])))`},
		{"b", `go_goroutines + process_resident_memory_bytes{x="y"} / keyheat_x:ratio`},
		{"c", `label_values(keyheat_detect_partitions, instance) $__keyheat_not $go_not`},
	})
	require.Equal(t, map[string][]string{
		"keyheat_api_request_duration_seconds_bucket": {"a"},
		"go_goroutines": {"b"}, "process_resident_memory_bytes": {"b"}, "keyheat_x:ratio": {"b"},
		"keyheat_detect_partitions": {"c"},
	}, got)
}

// sample is one line of the text exposition format: a series.
type sample struct {
	name   string
	labels []label
}

type label struct{ name, value string }

// key is the series' identity: its name and labels as exposed.
func (s sample) key() string {
	var b strings.Builder
	b.WriteString(s.name)
	for _, l := range s.labels {
		fmt.Fprintf(&b, ",%s=%q", l.name, l.value)
	}
	return b.String()
}

// parseExposition reads Prometheus's text format (what promhttp serves
// without negotiation): one sample per line, label values with \\, \"
// and \n escaped.
func parseExposition(body string) ([]sample, error) {
	var out []sample
	for ln, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.IndexAny(line, "{ ")
		if i <= 0 {
			return nil, fmt.Errorf("line %d: no metric name: %q", ln+1, line)
		}
		s := sample{name: line[:i]}
		rest := line[i:]
		if rest[0] == '{' {
			rest = rest[1:]
			for {
				if strings.HasPrefix(rest, "}") {
					rest = rest[1:]
					break
				}
				eq := strings.Index(rest, `="`)
				if eq <= 0 {
					return nil, fmt.Errorf("line %d: bad label in %q", ln+1, line)
				}
				l := label{name: rest[:eq]}
				rest = rest[eq+2:]
				var v strings.Builder
				closed := false
				for j := 0; j < len(rest); j++ {
					c := rest[j]
					if c == '\\' && j+1 < len(rest) {
						j++
						switch rest[j] {
						case 'n':
							v.WriteByte('\n')
						default:
							v.WriteByte(rest[j])
						}
						continue
					}
					if c == '"' {
						rest, closed = rest[j+1:], true
						break
					}
					v.WriteByte(c)
				}
				if !closed {
					return nil, fmt.Errorf("line %d: unterminated label value in %q", ln+1, line)
				}
				l.value = v.String()
				s.labels = append(s.labels, l)
				rest = strings.TrimPrefix(rest, ",")
			}
		}
		if !strings.HasPrefix(rest, " ") || len(strings.Fields(rest)) == 0 {
			return nil, fmt.Errorf("line %d: no value: %q", ln+1, line)
		}
		out = append(out, s)
	}
	return out, nil
}

// TestParseExposition: label values come back unescaped, whatever they
// hold.
func TestParseExposition(t *testing.T) {
	got, err := parseExposition("# HELP a x\n# TYPE a counter\na 1\n" +
		`b{x="q\"u\\o\nte",y="<script>"} 2 1700000000000` + "\n" + `c{} 3` + "\n")
	require.NoError(t, err)
	require.Equal(t, []sample{{name: "a"}, {name: "b", labels: []label{{"x", "q\"u\\o\nte"}, {"y", "<script>"}}}, {name: "c"}}, got)
	for _, bad := range []string{"{x=\"1\"} 1", `a{x="1} 2`, `a{x} 2`, "a"} {
		_, err := parseExposition(bad)
		require.Error(t, err, "%q", bad)
	}
}

// scrape returns the series on addr's /metrics.
func scrape(t testing.TB, addr string) ([]sample, error) {
	body, err := scrapeBody(t, addr)
	if err != nil {
		return nil, err
	}
	return parseExposition(body)
}

// scrapeBody returns addr's /metrics as served.
func scrapeBody(t testing.TB, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx(t), "GET", "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return string(b), nil
}

// TestBoardMetricsServed runs detect the way the board watches it (the
// operator API on, both sinks on, a hot key, dead letters, a rule reload,
// a ClickHouse table gone for a while) and checks that every metric the
// board queries is on /metrics. Series of a labelled metric appear only
// once something happened to them, hence the events.
func TestBoardMetricsServed(t *testing.T) {
	_, qs := loadBoard(t)
	used := boardMetrics(qs)
	for m := range notServed {
		require.Contains(t, used, m, "notServed lists %s, which the board does not use", m)
	}

	seeds := testenv.KFake(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 2))
	conn := testenv.ClickHouseConn(t)
	db := testenv.ClickHouseDatabase(t, conn)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "keyheat.yaml")
	rules := func(rate int) {
		tmp := filepath.Join(dir, ".tmp")
		body := fmt.Sprintf("pipeline:\n  rules: [{name: t, key: \"*\", window: 1s, rate: %d}]\n", rate)
		require.NoError(t, os.WriteFile(tmp, []byte(body), 0o600))
		require.NoError(t, os.Rename(tmp, cfgFile))
	}
	rules(200)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "archive"), 0o700))
	apiAddr, metricsAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	args := append([]string{"run", "--config=" + cfgFile, "--api.addr=" + apiAddr, "--metrics.addr=" + metricsAddr,
		"--archive.root=" + filepath.Join(dir, "archive"), "--archive.segment_age=200ms"},
		chFlags(testenv.ClickHouseAddr(t), db)...)
	p := start(t, nil, append(args, e.flags()...)...)
	base := "http://" + apiAddr + "/"
	until(t, p, "the API answers", func() bool {
		code, _ := apiCall(t, "GET", base+"api/hotkeys", "", nil)
		return code == http.StatusOK
	})

	// "hot" at 250/s over the 200/s rule, for 3 s of event time.
	startMs := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	produceEvents(t, seeds, e.events, 3000, startMs, 1, 4, 100)
	until(t, p, "the detector's hot key listed", func() bool { return listed(t, base, "app", "hot") == "detector" })
	ex := func(q string) {
		require.NoError(t, conn.Exec(ctx(t), q), "%s", q)
	}
	// ClickHouse's failures counter has a series once an insert failed:
	// the reports table goes away until one has.
	ex("RENAME TABLE " + db + ".reports TO " + db + ".reports_away")
	produceEvents(t, seeds, e.events, 3000, startMs+3000, 1, 4, 100)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx(t), &kgo.Record{Topic: e.events, Value: []byte("\x00not json\xff")}).FirstErr())
	cl.Close()
	waitSeries(t, p, metricsAddr, "a failed insert", func(names map[string]bool) bool {
		return names["keyheat_clickhouse_insert_failures_total"]
	})
	ex("RENAME TABLE " + db + ".reports_away TO " + db + ".reports")
	rules(300)
	p.WaitStderr(`msg="rules reloaded"`)
	produceEvents(t, seeds, e.events, 3000, startMs+6000, 1, 4, 100)

	var missing []string
	waitSeries(t, p, metricsAddr, "every metric of the board", func(names map[string]bool) bool {
		missing = missing[:0]
		for m, where := range used {
			if names[m] == notServed[m] {
				missing = append(missing, m+" ("+strings.Join(where, "; ")+")")
			}
		}
		return len(missing) == 0
	}, func() string {
		sort.Strings(missing)
		return "metrics of the board not on /metrics (or served though in notServed):\n  " + strings.Join(missing, "\n  ")
	})
	require.Equal(t, 0, p.Stop())
}

// waitSeries waits until cond holds of the metric names on p's /metrics
// at addr (sample names: a histogram's _bucket, _sum and _count); why
// says what failed if it never does.
func waitSeries(t *testing.T, p *testenv.Process, addr, what string, cond func(names map[string]bool) bool, why ...func() string) {
	t.Helper()
	var err error
	until(t, p, what, func() bool {
		var ss []sample
		if ss, err = scrape(t, addr); err != nil {
			return false
		}
		names := map[string]bool{}
		for _, s := range ss {
			names[s.name] = true
		}
		return cond(names)
	}, func() string {
		msg := fmt.Sprintf("last scrape error: %v", err)
		for _, w := range why {
			msg += "\n" + w()
		}
		return msg
	})
}

// until waits until cond holds, failing as soon as p exits; why, when
// given, adds to the failure what the test knows of it.
func until(t *testing.T, p *testenv.Process, what string, cond func() bool, why ...func() string) {
	t.Helper()
	deadline := time.Now().Add(testenv.HangGuard) // the condition is what is waited on
	for !cond() {
		fail := ""
		select {
		case <-p.Done():
			fail = fmt.Sprintf("detect exited (%v) while waiting for %s", p.Err(), what)
		default:
			if time.Now().After(deadline) {
				fail = "timed out waiting for " + what
			}
		}
		if fail != "" {
			for _, w := range why {
				fail += "\n" + w()
			}
			t.Fatal(fail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
