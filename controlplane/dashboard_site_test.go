package controlplane_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// EnvScreenshot names a file TestDashboardRealistic writes a screenshot of
// the page to (a PNG), when set: the README's docs/dashboard.png is made
// with it.
const EnvScreenshot = "KEYHEAT_SCREENSHOT"

// hotEvent is a detector record of key of app with a mitigation kind
// (local_cache or split, with split shards).
func siteEvent(app, key string, rate, peak float64, kind string, split int, onset time.Time) *schemas.HotKeyEvent {
	now := time.Now().UnixMilli()
	h := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, Type: schemas.HotKeyHot, App: app, Key: key,
		KeyHash: "", Rule: "default", Rate: rate, PeakRate: peak, Threshold: 1000, WindowMs: 10000,
		Topic: "keyheat.events", Partition: int32(len(key) % 12), OnsetMs: onset.UnixMilli(), DetectedMs: now,
		Mitigation: &schemas.Mitigation{Kind: kind, Split: split}}
	h.ID = schemas.HotKeyID(h.Topic, h.Partition, h.Rule, h.Type, app, key, h.OnsetMs)
	return h
}

func eventRecord(t testing.TB, h *schemas.HotKeyEvent) *kgo.Record {
	t.Helper()
	v, err := h.AppendJSON(nil)
	require.NoError(t, err)
	return &kgo.Record{Key: schemas.HotKeyRecordKey(h.App, h.Key), Value: v}
}

// fleet is a realistic registry: several apps, keys of very different
// rates, some split, and a cluster report and alerts that match them.
type fleet struct {
	mu     sync.Mutex
	keys   []*schemas.HotKeyEvent
	alerts []*schemas.HotKeyEvent
	report schemas.WindowReport
}

func newFleet(t testing.TB) *fleet {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	now := time.Now()
	fl := &fleet{}
	names := map[string][]string{
		"shop":    {"product:%d", "price:%d", "stock:sku-%d"},
		"cart":    {"cart:user-%d"},
		"search":  {"q:%s"},
		"session": {"sess:%x"},
		"feed":    {"timeline:%d", "trending:%s"},
	}
	words := []string{"iphone", "shoes", "lego", "airpods", "ps5", "switch", "jacket", "tv", "coffee", "kindle"}
	for _, app := range []string{"cart", "feed", "search", "session", "shop"} {
		forms := names[app]
		for i := range 9 {
			form := forms[i%len(forms)]
			var key string
			if form == "q:%s" || form == "trending:%s" {
				key = fmt.Sprintf(form, words[rng.IntN(len(words))]+fmt.Sprint(i))
			} else {
				key = fmt.Sprintf(form, 1000+rng.IntN(90000))
			}
			rate := 1000 * math.Exp(rng.Float64()*4.5)
			kind, split := schemas.MitigationLocalCache, 0
			if rate > 40000 {
				kind, split = schemas.MitigationSplit, 8
			}
			onset := now.Add(-time.Duration(rng.IntN(3600)) * time.Second)
			fl.keys = append(fl.keys, siteEvent(app, key, rate, rate*(1+rng.Float64()*0.4), kind, split, onset))
		}
	}
	// Alerts of the last quarter hour, newest first.
	for i := range 28 {
		k := fl.keys[rng.IntN(len(fl.keys))]
		e := *k
		e.Type = []string{schemas.HotKeyHot, schemas.HotKeyUpdate, schemas.HotKeyUpdate, schemas.HotKeyCooled}[rng.IntN(4)]
		e.DetectedMs = now.Add(-time.Duration(i*30+rng.IntN(25)) * time.Second).UnixMilli()
		if e.Type == schemas.HotKeyCooled {
			e.Mitigation, e.Rate = nil, e.Threshold*0.4
		}
		e.ID = k.ID + "/" + strconv.Itoa(i) // an event of its own, not k's again
		fl.alerts = append(fl.alerts, &e)
	}
	// The last closed minute's cluster report.
	start := now.Truncate(time.Minute).Add(-time.Minute)
	r := schemas.WindowReport{Version: schemas.ReportVersion, Scope: schemas.ScopeCluster,
		StartMs: start.UnixMilli(), EndMs: start.Add(time.Minute).UnixMilli(), Topics: []string{"keyheat.events"}, Keyed: true}
	r.ID = schemas.WindowReportID(r.Scope, "", r.StartMs)
	var total float64
	for p := range 12 {
		ev := 2_000_000 + rng.Float64()*600_000
		if p == 5 {
			ev *= 3.4 // the partition a hot key lands on
		}
		total += ev
		r.Skew.Partitions = append(r.Skew.Partitions, schemas.PartitionLoad{Topic: "keyheat.events", Partition: int32(p), Events: uint64(ev)})
	}
	r.Events = uint64(total)
	r.Distinct = 1_840_000
	for i := range r.Skew.Partitions {
		r.Skew.Partitions[i].Share = float64(r.Skew.Partitions[i].Events) / total
	}
	r.Skew.MaxMean, r.Skew.Gini = 2.61, 0.19
	top := append([]*schemas.HotKeyEvent(nil), fl.keys...)
	for i := range top { // by rate, heaviest first
		for j := i + 1; j < len(top); j++ {
			if top[j].Rate > top[i].Rate {
				top[i], top[j] = top[j], top[i]
			}
		}
	}
	for _, k := range top[:20] {
		c := uint64(k.Rate * 60)
		r.Top = append(r.Top, schemas.KeyCount{App: k.App, Key: k.Key, Count: c, Partition: k.Partition, Share: float64(c) / total})
	}
	r.Skew.Top1Share, r.Skew.Top10Share = r.Top[0].Share, 0.21
	first := uint16(0)
	for n := range 6 {
		last := uint16((n + 1) * 16384 / 6)
		if n == 5 {
			last = 16383
		} else {
			last--
		}
		r.Skew.Nodes = append(r.Skew.Nodes, schemas.NodeLoad{Node: fmt.Sprintf("redis-%d", n+1), FirstSlot: first, LastSlot: last})
		first = last + 1
	}
	var nodeTotal float64
	for i := range r.Skew.Nodes {
		ev := 4_000_000 + rng.Float64()*1_000_000
		if i == 2 {
			ev *= 1.9
		}
		r.Skew.Nodes[i].Events = uint64(ev)
		nodeTotal += ev
	}
	for i := range r.Skew.Nodes {
		r.Skew.Nodes[i].Share = float64(r.Skew.Nodes[i].Events) / nodeTotal
	}
	r.Skew.NodeMaxMean, r.Skew.NodeGini = 1.62, 0.12
	for i := range 10 {
		r.Skew.HotSlots = append(r.Skew.HotSlots, schemas.SlotCount{Slot: uint16(5461 + 37*i*i), Events: uint64(900_000 / (i + 1))})
	}
	fl.report = r
	return fl
}

// TestDashboardRealistic: a registry of several apps with the latest
// report and recent alerts; every panel shows them. With
// KEYHEAT_SCREENSHOT set it writes a screenshot of the page there.
func TestDashboardRealistic(t *testing.T) {
	fl := newFleet(t)
	s := newSiteWith(t, controlplane.DashboardConfig{PollInterval: 250 * time.Millisecond})
	s.hist.AddReport(&fl.report)
	for _, a := range fl.alerts {
		s.hist.AddAlert(a)
	}
	var recs []*kgo.Record
	for _, k := range fl.keys {
		recs = append(recs, eventRecord(t, k))
	}
	s.reg.produce(recs...)
	// Three keys an operator promoted by hand, one of a binary key.
	s.api.promote("shop", "product:1", controlplane.PromoteRequest{Mitigation: "split", SplitFactor: 16, TTL: "30m", By: "ana", Reason: "launch"})
	s.api.promote("cart", "cart:user-flash", controlplane.PromoteRequest{Mitigation: "coalesce", TTL: "45s", By: "ana"})
	s.api.promote("session", "sess:\xde\xad\xbe\xef", controlplane.PromoteRequest{Mitigation: "local_cache", TTL: "2h", By: "oncall"})
	// Not a barrier: its keys would show on the page.
	testenv.Eventually(t, "the follower has the registry", func() bool {
		for _, k := range fl.keys {
			if !s.f.IsHot(k.App, k.Key) {
				return false
			}
		}
		return s.f.IsHot("session", "sess:\xde\xad\xbe\xef")
	})

	b := newTab(t, 1440, 900)
	b.open(s.url)

	// The rates move for a dozen reads, so that the sparklines have a
	// shape: each round waits until the page shows the new rate of the
	// heaviest key.
	rng := rand.New(rand.NewPCG(3, 5))
	heavy := fl.report.Top[0]
	for round := range 14 {
		var recs []*kgo.Record
		var shown string
		for _, k := range fl.keys {
			k.Rate = math.Max(100, k.Rate*(0.8+rng.Float64()*0.45))
			k.PeakRate = math.Max(k.PeakRate, k.Rate)
			k.Type = schemas.HotKeyUpdate
			k.DetectedMs = time.Now().UnixMilli()
			recs = append(recs, eventRecord(t, k))
			if k.App == heavy.App && k.Key == heavy.Key {
				shown = fmt.Sprintf("%.0f", k.Rate)
			}
		}
		s.reg.produce(recs...)
		_ = round
		b.WaitFor("the new rate of the heaviest key", fmt.Sprintf(`(() => {
			const r = %s.find(r => r.app === %s && r.key === %s);
			if (!r) return false;
			const want = Number(%s), got = r.rate;
			const n = parseFloat(got) * (got.endsWith('K') ? 1e3 : got.endsWith('M') ? 1e6 : 1);
			return Math.abs(n - want) <= want * 0.051;
		})()`, rowsJS, jsString(heavy.App), jsString(heavy.Key), shown))
	}

	b.WaitFor("the report", `!document.getElementById('report-body').hidden`)
	require.Equal(t, 10, eval[int](b, `document.querySelectorAll('#top-list li').length`), "the top 10 keys")
	require.Equal(t, heavy.App+heavy.Key, eval[string](b, `document.querySelector('#top-list li .lbl').textContent`))
	require.Equal(t, 12, eval[int](b, `document.querySelectorAll('#part-list li').length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('#part-list li.skewed').length`), "partition 5 carries 3.4 times the others")
	require.Equal(t, "5", eval[string](b, `document.querySelector('#part-list li.skewed .cl').textContent`))
	require.Equal(t, "redis-3", eval[string](b, `document.querySelector('#node-list li.skewed .cl').textContent`))
	require.Equal(t, 6, eval[int](b, `document.querySelectorAll('#node-list li').length`))
	require.Equal(t, 10, eval[int](b, `document.querySelectorAll('#slot-list .chip').length`))
	require.Equal(t, len(fl.alerts), eval[int](b, `document.querySelectorAll('#alert-list li').length`))
	require.Positive(t, eval[int](b, `document.querySelectorAll('#alert-strip circle').length`))
	// The manual entries have no rate: they are last, past the rows in
	// the DOM, until a filter shows them.
	b.filterKeys("sess:")
	b.WaitFor("the binary key, escaped", hasRow("session", `sess:\xde\xad\xbe\xef`, `r.source === 'manual'`))
	b.filterKeys("product:1")
	b.WaitFor("a split promote", hasRow("shop", "product:1", `r.mitigation === 'split ×16'`))
	b.filterKeys("")

	if path := os.Getenv(EnvScreenshot); path != "" {
		// The status line's clock and the countdowns move; nothing else
		// does between two reads.
		png := b.Screenshot()
		require.NoError(t, os.WriteFile(path, png, 0o644))
		t.Logf("screenshot: %s (%d bytes)", path, len(png))
	}
	b.NoProblems()
}
