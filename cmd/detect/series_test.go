package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// What a flood of distinct keys does to detect's /metrics: nothing. A
// Prometheus server scraping detect must see the same number of series
// whatever the keys, and no key in a label, however hostile.

// hostileKeys are keys that would break the exposition format, a
// dashboard or a shell if they reached a label. Each is sent hot.
var hostileKeys = []string{
	`"quoted" key`,
	"two\nlines",
	`<script>alert(1)</script>`,
	`x{key="y"} 1`,
	`back\slash\"}`,
	"tab\tand\x7f",
}

// longKey is over the run's events.max_key_bytes: dead-lettered.
var longKey = "<script>" + strings.Repeat("x", 300)

// seriesMaxKeyBytes is the run's events.max_key_bytes.
const seriesMaxKeyBytes = 256

// floodEvents is the number of events of each run: a million, a tenth of
// that under the race detector, which slows detect (built with it) about
// tenfold.
func floodEvents() int {
	if raceEnabled {
		return 100_000
	}
	return 1_000_000
}

// seriesScrape is what one run left on /metrics.
type seriesScrape struct {
	samples  []sample
	families map[string]int // sample name → series
	topic    string         // the run's events topic
}

func (s seriesScrape) total() int { return len(s.samples) }

// floodRun runs detect (metrics and the operator API on) over n events on
// distinct keys key:0 … key:keys-1 in four apps, key:hot and the hostile
// keys hot among them (each about 570/s in app0, over the 200/s rule),
// junk records and an overlong key for the DLQ, sends the API hostile
// keys in paths, and returns /metrics once detect is through the flood.
func floodRun(t *testing.T, n, keys int) seriesScrape {
	t.Helper()
	seeds := testenv.KFake(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 4))
	apiAddr, metricsAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	p := start(t, nil, append([]string{"run", sinkRules, "--api.addr=" + apiAddr, "--metrics.addr=" + metricsAddr},
		e.flags("--events.max_key_bytes="+strconv.Itoa(seriesMaxKeyBytes))...)...)
	base := "http://" + apiAddr + "/"
	until(t, p, "the API answers", func() bool {
		code, _ := apiCall(t, "GET", base+"api/hotkeys", "", nil)
		return code == http.StatusOK
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(50_000), kgo.ProducerBatchMaxBytes(1<<20))
	require.NoError(t, err)
	defer cl.Close()
	var (
		mu      sync.Mutex
		prodErr error
	)
	produce := func(key, value []byte) {
		cl.Produce(ctx(t), &kgo.Record{Topic: e.events, Key: key, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				prodErr = err
				mu.Unlock()
			}
		})
	}
	// 100,000 events a second of event time, an hour ago (a million take
	// ten seconds); every 25th event is a hostile key or key:hot, each
	// well over the 200/s rule.
	startMs := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	spanMs := int64(n) / 100
	hot := append([]string{"key:hot"}, hostileKeys...)
	dlq := 0
	for i := range n {
		key, app := "key:"+strconv.Itoa(i%keys), "app"+strconv.Itoa(i%4)
		if i%25 == 0 {
			key, app = hot[(i/25)%len(hot)], "app0"
		}
		ev := schemas.AccessEvent{TimeMs: startMs + int64(i)*spanMs/int64(n), Key: key, App: app, Op: "GET", Bytes: 100}
		produce([]byte(key), schemas.AppendJSON(nil, &ev))
		if i%(n/100) == 0 { // junk: binary, and a key over the limit
			produce([]byte("junk"), []byte{0, 0xff, '{', '"', 0xfe, '\n', '<'})
			ev.Key = longKey
			produce([]byte(longKey), schemas.AppendJSON(nil, &ev))
			dlq += 2
		}
	}
	require.NoError(t, cl.Flush(ctx(t)))
	require.NoError(t, prodErr)
	// Two events an hour later on every partition: the first closes the
	// flood's last window, the second the first's.
	sentinel, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer sentinel.Close()
	for part := range int32(4) {
		for j := range int64(2) {
			ev := schemas.AccessEvent{TimeMs: startMs + spanMs + time.Hour.Milliseconds() + j*2000, Key: "sentinel", App: "app0", Op: "GET"}
			require.NoError(t, sentinel.ProduceSync(ctx(t),
				&kgo.Record{Topic: e.events, Partition: part, Key: []byte(ev.Key), Value: schemas.AppendJSON(nil, &ev)}).FirstErr())
		}
	}

	// The API with keys in paths, escaped, and refused (no token).
	calls := 0
	for _, k := range append([]string{longKey}, hot...) {
		esc := url.PathEscape(k)
		for _, c := range []struct{ method, path string }{
			{"GET", "api/hotkeys/" + esc}, {"DELETE", "api/hotkeys/" + esc + "?app=app0"},
			{"POST", "api/hotkeys/" + esc + "/promote"}, {"PUT", "api/hotkeys/" + esc}, {"GET", "api/" + esc},
		} {
			code, b := apiCall(t, c.method, base+c.path, "", map[string]any{"app": "app0", "ttl": "1m"})
			require.NotZero(t, code, "%s %s: %s", c.method, c.path, b)
			calls++
		}
	}

	// The sentinels' first window is reported once every partition is
	// through the flood (its report needs them all), whatever rebalances
	// a starved machine caused on the way.
	sentinelMs := startMs + spanMs + time.Hour.Milliseconds()
	reported := func() bool {
		for _, r := range readTopic(t, seeds, e.reports) {
			rep, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			if rep.StartMs == sentinelMs {
				return true
			}
		}
		return false
	}
	var last seriesScrape
	var sums map[string]float64
	what := fmt.Sprintf("the sentinels' window reported, %d dead letters and %d hot keys published, %d API calls counted",
		dlq, len(hot), calls)
	until(t, p, what, func() bool {
		if !reported() {
			return false
		}
		ss, err := scrapeValues(t, metricsAddr)
		if err != nil {
			return false
		}
		sums = ss.sums
		last = ss.seriesScrape
		last.topic = e.events
		// Counters not by partition: a partition read again after a
		// rebalance on a starved machine counts its dead letters twice.
		return int(sums["keyheat_detect_dlq_total"]) >= dlq &&
			int(sums["keyheat_detect_hotkeys_total"]) >= len(hot) && int(sums["keyheat_api_requests_total"]) >= calls+1
	}, func() string { return fmt.Sprintf("sums: %v", sums) })
	require.Equal(t, 0, p.Stop())
	return last
}

// valuesScrape is a scrape with each sample name's values summed.
type valuesScrape struct {
	seriesScrape
	sums map[string]float64
}

func scrapeValues(t testing.TB, addr string) (valuesScrape, error) {
	ss, vals, err := scrapeWithValues(t, addr)
	if err != nil {
		return valuesScrape{}, err
	}
	out := valuesScrape{seriesScrape: seriesScrape{samples: ss, families: map[string]int{}}, sums: map[string]float64{}}
	for i, s := range ss {
		out.families[s.name]++
		out.sums[s.name] += vals[i]
	}
	return out, nil
}

// scrapeWithValues scrapes addr and reads each sample's value too.
func scrapeWithValues(t testing.TB, addr string) ([]sample, []float64, error) {
	body, err := scrapeBody(t, addr)
	if err != nil {
		return nil, nil, err
	}
	ss, err := parseExposition(body)
	if err != nil {
		return nil, nil, err
	}
	var vals []float64
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the last '}' (label values may hold spaces),
		// or the name.
		rest := line[strings.LastIndexByte(line, '}')+1:]
		f := strings.Fields(rest)
		if strings.LastIndexByte(line, '}') < 0 {
			f = f[1:]
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, nil, fmt.Errorf("value of %q: %w", line, err)
		}
		vals = append(vals, v)
	}
	if len(vals) != len(ss) {
		return nil, nil, fmt.Errorf("%d values for %d samples", len(vals), len(ss))
	}
	return ss, vals, nil
}

// requireNoKeyInLabels fails if a label value is one of the run's keys:
// a planted one, one of the flood's (key:…), or the dead-lettered one.
func requireNoKeyInLabels(t *testing.T, s seriesScrape) {
	t.Helper()
	planted := map[string]bool{longKey: true}
	for _, k := range hostileKeys {
		planted[k] = true
	}
	for _, smp := range s.samples {
		for _, l := range smp.labels {
			v := l.value
			require.False(t, planted[v], "a planted key as the %s label of %s", l.name, smp.key())
			require.False(t, strings.HasPrefix(v, "key:"), "a flood key as the %s label of %s", l.name, smp.key())
			require.NotContains(t, v, "<script>", "%s", smp.key())
			require.NotContains(t, v, "\n", "%s", smp.key())
		}
	}
}

// TestSeriesBoundedUnderKeyFlood: detect's series do not grow with the
// number of distinct keys, and no key is a label value. Two runs of the
// same events, one over 10,000 distinct keys and one over as many keys as
// events, must leave the same series on /metrics but for names in
// loadDependent, whose label values are bounded enumerations.
func TestSeriesBoundedUnderKeyFlood(t *testing.T) {
	n := floodEvents()
	few := floodRun(t, n, 10_000)
	many := floodRun(t, n, n)
	requireNoKeyInLabels(t, few)
	requireNoKeyInLabels(t, many)

	// A series' identity with the run's topic name, which differs
	// between runs, as "<events>".
	keys := func(s seriesScrape) map[string]bool {
		out := map[string]bool{}
		for _, smp := range s.samples {
			ls := slices.Clone(smp.labels)
			for i := range ls {
				if ls[i].value == s.topic {
					ls[i].value = "<events>"
				}
			}
			out[sample{name: smp.name, labels: ls}.key()] = true
		}
		return out
	}
	fk, mk := keys(few), keys(many)
	var onlyFew, onlyMany []string
	for k := range fk {
		if !mk[k] {
			onlyFew = append(onlyFew, k)
		}
	}
	for k := range mk {
		if !fk[k] {
			onlyMany = append(onlyMany, k)
		}
	}
	sort.Strings(onlyFew)
	sort.Strings(onlyMany)
	t.Logf("%d events: %d series over 10,000 keys, %d over %d keys; only with few keys: %v; only with many: %v",
		n, few.total(), many.total(), n, onlyFew, onlyMany)
	var names []string
	for name := range many.families {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Logf("  %-60s %3d %3d", name, few.families[name], many.families[name])
	}
	require.Less(t, many.total(), maxSeries, "series on /metrics")
	for name, c := range many.families {
		require.LessOrEqual(t, c, maxPerName, "series of %s", name)
	}
	for _, k := range append(onlyFew, onlyMany...) {
		name, _, _ := strings.Cut(k, ",")
		require.True(t, loadDependent[name], "series %s in one run only", k)
	}
}

// maxSeries and maxPerName bound a flooded run's /metrics. A run here
// leaves 261 series (about 60 of them the Go runtime's and the
// process's), over 10,000 keys or a million; the most under one
// name are keyheat_api_request_duration_seconds_bucket's 80, 16 buckets
// for each of the 5 routes called.
const (
	maxSeries  = 400
	maxPerName = 96
)

// loadDependent are sample names whose series may differ between two runs
// with what each met on a loaded machine, every label from a fixed set.
var loadDependent = map[string]bool{
	"keyheat_detect_pipeline_total":      true, // counter: the pipeline's counter names, present once non-zero
	"keyheat_detect_progress_sent_total": true, // result: error, under load
	// code: the wait for the API counts the 503s it gets while detect
	// is still starting, none when it starts fast (a loaded CI run).
	"keyheat_api_requests_total": true,
}
