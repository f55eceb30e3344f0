package detect_test

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// The fixed-seed stream the end-to-end tests share, and what they read
// back: keyed records on parts partitions, placed by a hash of the key
// computed here (not by keyheat or the client's partitioner), so the same
// stream lands the same way on kfake and on a real broker.

// streamEvents is seed's stream: ms milliseconds of event time from
// baseMs, perMs background events per millisecond over 400 keys (key r
// drawn with weight ~1/r) in apps shop, cart and auth, plus "planted" in
// app shop at 1500 events/s during [ms/4, ms/2): a key the default rule
// (1000 events/s) calls hot.
func streamEvents(seed uint64, baseMs, ms int64, perMs int) []schemas.AccessEvent {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	apps := []string{"shop", "cart", "auth"}
	ops := []string{"GET", "GET", "GET", "SET"}
	var out []schemas.AccessEvent
	for t := range ms {
		for range perMs {
			r := int(400 / (1 + rng.Float64()*399)) // ~1/r
			out = append(out, schemas.AccessEvent{TimeMs: baseMs + t, Key: fmt.Sprintf("user:%d", r),
				App: apps[r%3], Op: ops[rng.IntN(4)], Bytes: int64(64 + rng.IntN(512)), LatencyUs: int64(rng.IntN(900))})
		}
		if t >= ms/4 && t < ms/2 { // 1.5 per ms, spread evenly
			out = append(out, schemas.AccessEvent{TimeMs: baseMs + t, Key: "planted", App: "shop", Op: "GET", Bytes: 100})
			if t%2 == 0 {
				out = append(out, schemas.AccessEvent{TimeMs: baseMs + t, Key: "planted", App: "shop", Op: "GET", Bytes: 100})
			}
		}
	}
	return out
}

// partitionOf is the test's own placement of a key.
func partitionOf(key string, parts int32) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int32(h.Sum32() % uint32(parts))
}

// records are evs as keyed JSON records of topic, placed by partitionOf.
func records(topic string, parts int32, evs []schemas.AccessEvent) []*kgo.Record {
	out := make([]*kgo.Record, len(evs))
	for i := range evs {
		out[i] = &kgo.Record{Topic: topic, Partition: partitionOf(evs[i].Key, parts), Key: []byte(evs[i].Key),
			Value: schemas.AppendJSON(nil, &evs[i])}
	}
	return out
}

// produceMany writes recs in batches, each partition's in order.
func produceMany(t *testing.T, seeds []string, recs []*kgo.Record) {
	t.Helper()
	for len(recs) > 0 {
		n := min(len(recs), 5000)
		produce(t, seeds, recs[:n]...)
		recs = recs[n:]
	}
}

// reportLog is every report record on a topic.
type reportLog struct {
	byID    map[string][]string // every version of each report, in topic order
	records int
}

func readReports(t *testing.T, seeds []string, topic string) reportLog {
	t.Helper()
	l := reportLog{byID: map[string][]string{}}
	for _, r := range readAll(t, seeds, topic) {
		rep, err := schemas.DecodeWindowReport(r.Value)
		require.NoError(t, err)
		require.Equal(t, rep.ID, string(r.Key), "a report's record key is its ID")
		l.byID[rep.ID] = append(l.byID[rep.ID], string(r.Value))
		l.records++
	}
	return l
}

// once returns each report's single version, failing if any was
// published twice.
func (l reportLog) once(t *testing.T) map[string]string {
	t.Helper()
	out := make(map[string]string, len(l.byID))
	for id, vs := range l.byID {
		require.Len(t, vs, 1, "report %s published %d times:\n%s", id, len(vs), strings.Join(vs, "\n"))
		out[id] = vs[0]
	}
	return out
}

// ordered returns reports as JSON lines in (window, scope, app) order,
// with the events topic's name replaced by EVENTS so that runs on
// differently named topics compare.
func ordered(t *testing.T, reports map[string]string, events string) []byte {
	t.Helper()
	type rep struct {
		startMs    int64
		scope, app string
		json       string
	}
	var all []rep
	for _, v := range reports {
		r, err := schemas.DecodeWindowReport([]byte(v))
		require.NoError(t, err)
		all = append(all, rep{r.StartMs, r.Scope, r.App, v})
	}
	slices.SortFunc(all, func(a, b rep) int {
		return cmp.Or(cmp.Compare(a.startMs, b.startMs), cmp.Compare(a.scope, b.scope), cmp.Compare(a.app, b.app))
	})
	var b strings.Builder
	for _, r := range all {
		b.WriteString(strings.ReplaceAll(r.json, events, "EVENTS"))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// runToEnd runs cfg as an exit-at-end batch and fails unless it ends
// cleanly.
func runToEnd(t *testing.T, cfg detect.Config) {
	t.Helper()
	cfg.ExitAtEnd = true
	svc, err := detect.New(cfg)
	require.NoError(t, err)
	// No deadline of its own: a slow run on a starved machine is no
	// failure, and one that never ends meets the test's -timeout, whose
	// dump shows where it hangs.
	require.NoError(t, svc.Run(t.Context()), "an exit-at-end run ends by itself, cleanly")
}

// over is an env on the existing events topic of e with its own output
// topics and groups: a second run over the same input that starts from
// nothing.
func (e *env) over(t *testing.T) *env {
	t.Helper()
	f := &env{seeds: e.seeds, events: e.events, parts: e.parts,
		dlq: testenv.UniqueName(t, "dlq"), hotkeys: testenv.UniqueName(t, "hot"), windows: testenv.UniqueName(t, "win"),
		reports: testenv.UniqueName(t, "rep"), progress: testenv.UniqueName(t, "prog"),
		group: testenv.UniqueName(t, "g"), mergeGroup: testenv.UniqueName(t, "m")}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = f.admin(t).DeleteTopics(ctx, f.dlq, f.hotkeys, f.windows, f.reports, f.progress)
	})
	return f
}
