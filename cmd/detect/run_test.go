package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// runEnv is one test's topics and groups, as detect flags.
type runEnv struct {
	seeds                                            []string
	events, dlq, hotkeys, windows, reports, progress string
	group, mergeGroup                                string
}

func newRunEnv(t testing.TB, seeds []string, events string) *runEnv {
	t.Helper()
	e := &runEnv{seeds: seeds, events: events,
		dlq: testenv.UniqueName(t, "dlq"), hotkeys: testenv.UniqueName(t, "hot"), windows: testenv.UniqueName(t, "win"),
		reports: testenv.UniqueName(t, "rep"), progress: testenv.UniqueName(t, "prog"),
		group: testenv.UniqueName(t, "g"), mergeGroup: testenv.UniqueName(t, "m")}
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			return
		}
		defer cl.Close()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx(t), e.dlq, e.hotkeys, e.windows, e.reports, e.progress)
	})
	return e
}

// flags point detect at the env; the test pipeline has no lateness, so
// windows close as soon as a later event comes.
func (e *runEnv) flags(extra ...string) []string {
	return append([]string{
		"--kafka.brokers=" + strings.Join(e.seeds, ","), "--kafka.partitions=4",
		"--kafka.topics.events=" + e.events, "--kafka.topics.dlq=" + e.dlq, "--kafka.topics.hotkeys=" + e.hotkeys,
		"--kafka.topics.windows=" + e.windows, "--kafka.topics.reports=" + e.reports, "--kafka.topics.progress=" + e.progress,
		"--detect.group=" + e.group, "--detect.merge_group=" + e.mergeGroup,
		"--detect.commit_interval=100ms", "--detect.session_timeout=6s", "--events.max_skew=0", "--pipeline.lateness=0",
	}, extra...)
}

// produceEvents writes n JSON events, keyed, to topic: event i has time
// startMs + i*stepMs and key hot when i%hotEvery == 0, else key:i%keys.
func produceEvents(t testing.TB, seeds []string, topic string, n int, startMs, stepMs int64, hotEvery, keys int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	batch := make([]*kgo.Record, 0, 1000)
	flush := func() {
		require.NoError(t, cl.ProduceSync(ctx(t), batch...).FirstErr())
		batch = batch[:0]
	}
	for i := range n {
		key := fmt.Sprintf("key:%d", i%keys)
		if hotEvery > 0 && i%hotEvery == 0 {
			key = "hot"
		}
		e := schemas.AccessEvent{TimeMs: startMs + int64(i)*stepMs, Key: key, App: "app", Op: "GET", Bytes: 100}
		batch = append(batch, &kgo.Record{Topic: topic, Key: []byte(key), Value: schemas.AppendJSON(nil, &e)})
		if len(batch) == cap(batch) {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// readTopic returns every record of topic up to its end offsets now.
func readTopic(t testing.TB, seeds []string, topic string) []*kgo.Record {
	t.Helper()
	adm, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx(t), topic)
	require.NoError(t, err)
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	var out []*kgo.Record
	c := ctx(t)
	for len(want) > 0 {
		fs := cl.PollFetches(c)
		require.NoError(t, c.Err(), "reading %s", topic)
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

// registryEvents decodes records of the registry topic in their order
// within each partition: every value is a hot-key event under its key's
// record key, except a tombstone (nil value), which must come right after
// a cooled of its record key, as every cooled must be followed by one. It
// returns the events, tombstones left out.
func registryEvents(t testing.TB, recs []*kgo.Record) []*schemas.HotKeyEvent {
	t.Helper()
	var evs []*schemas.HotKeyEvent
	owed := map[string]bool{} // record key → a cooled waits for its tombstone
	for _, r := range recs {
		k := string(r.Key)
		if r.Value == nil {
			require.True(t, owed[k], "a tombstone at %d/%d not right after a cooled of %q", r.Partition, r.Offset, k)
			delete(owed, k)
			continue
		}
		require.False(t, owed[k], "a record at %d/%d between a cooled of %q and its tombstone", r.Partition, r.Offset, k)
		h, err := schemas.DecodeHotKeyEvent(r.Value)
		require.NoError(t, err)
		require.Equal(t, string(schemas.HotKeyRecordKey(h.App, h.Key)), k)
		owed[k] = h.Type == schemas.HotKeyCooled
		evs = append(evs, h)
	}
	for k, o := range owed {
		require.False(t, o, "the cooled of %q has no tombstone after it", k)
	}
	return evs
}

// reports returns the reports on the topic by ID and how many records the
// topic held; a report published more than once must have the same
// content every time.
func reports(t testing.TB, seeds []string, topic string) (map[string]string, int) {
	t.Helper()
	recs := readTopic(t, seeds, topic)
	out := map[string]string{}
	for _, r := range recs {
		rep, err := schemas.DecodeWindowReport(r.Value)
		require.NoError(t, err)
		require.Equal(t, rep.ID, string(r.Key))
		if prev, ok := out[rep.ID]; ok {
			require.Equal(t, prev, string(r.Value), "report %s published again with other content", rep.ID)
		}
		out[rep.ID] = string(r.Value)
	}
	return out, len(recs)
}

// TestRunExitAtEnd: a batch run reads everything there is, prints every
// hot-key event and report as JSON lines as it produces them, and exits
// 0; the reports count every event.
func TestRunExitAtEnd(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 4))
		base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
		const n = 20_000
		produceEvents(t, seeds, e.events, n, base, 1, 4, 1000) // 20 s, "hot" at 250 events/s
		p := start(t, nil, append([]string{"run", "--exit-at-end", "--print=json",
			`--pipeline.rules=[{name: t, key: "*", window: 1s, rate: 200}]`}, e.flags()...)...)
		require.Equal(t, 0, p.WaitExit(), "an exit-at-end run ends by itself")

		var events uint64
		var hot []string
		windows := map[int64]bool{}
		for _, line := range strings.Split(p.Stdout.String(), "\n") {
			switch {
			case strings.Contains(line, `"scope":"cluster"`):
				rep, err := schemas.DecodeWindowReport([]byte(line))
				require.NoError(t, err)
				require.False(t, windows[rep.StartMs], "window %d reported twice", rep.StartMs)
				windows[rep.StartMs] = true
				events += rep.Events
			case strings.Contains(line, `"type":"hot"`):
				h, err := schemas.DecodeHotKeyEvent([]byte(line))
				require.NoError(t, err)
				hot = append(hot, h.Key)
			}
		}
		require.EqualValues(t, n, events, "every event in one report")
		require.Len(t, windows, 20)
		require.Equal(t, []string{"hot"}, slices.Compact(hot), "only the planted key is hot: %v", hot)
		recs, _ := reports(t, seeds, e.reports)
		require.Len(t, recs, 40, "a cluster and an app report per window, on the reports topic too")
	})
}

// TestRulesReload: rules change while detect runs when the config file
// changes; a file that fails validation is refused and the rules in force
// stay.
func TestRulesReload(t *testing.T) {
	seeds := testenv.KFake(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 1))
	dir := t.TempDir()
	file := filepath.Join(dir, "keyheat.yaml")
	rules := func(rate string) []byte {
		return []byte("pipeline:\n  idle_timeout: 1h\n  rules: [{name: r, key: \"*\", window: 1s, rate: " + rate + "}]\n")
	}
	save := func(body []byte) {
		tmp := filepath.Join(dir, ".tmp")
		require.NoError(t, os.WriteFile(tmp, body, 0o600))
		require.NoError(t, os.Rename(tmp, file))
	}
	save(rules("1000000"))
	p := start(t, nil, append([]string{"run", "--print=text", "--config=" + file}, e.flags()...)...)
	p.WaitStderr(`msg="partitions assigned"`)

	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	// "hot" 1100 times in 1.1 s: not hot at a million a second; the first
	// window's report shows it was read.
	produceEvents(t, seeds, e.events, 1100, base, 1, 1, 1)
	p.WaitStdout(`REPORT cluster events=1000 `)
	save(rules("100"))
	p.WaitStderr(`msg="rules reloaded".*rules=1`)
	produceEvents(t, seeds, e.events, 300, base+3000, 1, 1, 1)
	p.WaitStdout(`HOT +app "hot" rate=100\.0/s threshold=100/s rule=r`)

	save([]byte("pipeline:\n  rules: [{name: r, key: \"*\", window: 1s, rate: -1}]\n"))
	p.WaitStderr(`level=ERROR msg="config file changed but refused; the rules in force stay".*rate -1`)
	save([]byte("pipeline:\n  window: 2s\n  rules: [{name: r, key: \"*\", window: 1s, rate: 100}]\n"))
	p.WaitStderr(`level=ERROR msg="config file changed but refused.*restart for the other pipeline settings`)
	require.Equal(t, 0, p.Stop())
	require.Len(t, p.Stdout.Match(regexpOf(`HOT +app "hot"`)), 1, "the key turned hot once, under the reloaded rules")
}

// committedOffsets returns the group's committed offsets and metadata of
// topic, by partition.
func committedOffsets(t testing.TB, seeds []string, group, topic string) map[int32]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	os, err := kadm.NewClient(cl).FetchOffsets(ctx(t), group)
	require.NoError(t, err)
	out := map[int32]string{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic {
			out[o.Partition] = fmt.Sprintf("%d %s", o.At, o.Metadata)
		}
	})
	return out
}

// TestHealthAndMetrics: /livez answers, /readyz turns ready once the
// group is joined, and /metrics has the per-partition series.
func TestHealthAndMetrics(t *testing.T) {
	seeds := testenv.KFake(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 2))
	addr := testenv.FreeAddr(t)
	p := start(t, nil, append([]string{"run", "--metrics.addr=" + addr}, e.flags()...)...)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path) //nolint:noctx // a test against a local server
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testenv.Eventually(t, "ready", func() bool { code, _ := get("/readyz"); return code == 200 })
	code, _ := get("/livez")
	require.Equal(t, 200, code)
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	produceEvents(t, seeds, e.events, 2000, base, 1, 0, 10)
	wants := []string{
		`keyheat_detect_records_total{partition="0",topic="` + e.events + `"}`,
		`keyheat_detect_lag_records{partition="1",topic="` + e.events + `"}`,
		"keyheat_detect_committed_offset{", "keyheat_detect_windows_total", "keyheat_detect_partitions 2",
		"keyheat_detect_merger 1", "keyheat_merge_windows_total", `keyheat_detect_commits_total{group="detect",result="ok"}`,
		"keyheat_detect_rules_loaded_timestamp_seconds",
	}
	var m string
	testenv.Eventually(t, "every series", func() bool {
		_, m = get("/metrics")
		for _, w := range wants {
			if !strings.Contains(m, w) {
				return false
			}
		}
		return true
	})
	require.Equal(t, 0, p.Stop())
}

// TestRunMissingInputTopic: a typo in detect.topics stops detect at start
// with exit status 1 and one error naming the topic (the command's name
// once), and the topic is not created, kafka.create_topics or not.
func TestRunMissingInputTopic(t *testing.T) {
	seeds := testenv.KFake(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 1))
	typo := testenv.UniqueName(t, "typo")
	p := start(t, nil, append([]string{"run", "--exit-at-end", "--detect.topics=" + typo}, e.flags()...)...)
	require.Equal(t, 1, p.WaitExit())
	require.Contains(t, p.Stderr.String(), "detect: events topics "+typo+" do not exist")
	require.NotContains(t, p.Stderr.String(), "detect: detect:")
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx(t), typo)
	require.NoError(t, err)
	require.False(t, td.Has(typo), "the input topic was not created")
}
