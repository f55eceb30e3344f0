package detect_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// slidingCount is how many of tsMs (sorted) fall in (atMs − windowMs, atMs].
func slidingCount(tsMs []int64, atMs, windowMs int64) int {
	lo, _ := slices.BinarySearch(tsMs, atMs-windowMs+1)
	hi, _ := slices.BinarySearch(tsMs, atMs+1)
	return hi - lo
}

// TestPlantedHotKeyFromGen: traffic from ingest's generator with the
// planted schedule `ingest gen --hot` takes, consumed by detect from two
// partitions. Checked against the events read back from the topic and
// counted here:
//   - the planted key is published hot once, from the partition holding
//     it, its onset within one detection slot of the first event at which
//     its true count over the rule's window reaches the threshold, its rate
//     within 5% of its true rate at that onset;
//   - between, updates say its rate over the rule window ending at their
//     slot boundary, exactly as the events give it (at twice the rule,
//     the first update says so);
//   - it is published cooled once the cool-down has passed after its true
//     count fell back below the threshold;
//   - a whitelisted key as hot as it is never published;
//   - a key that turns hot while the ring is full of warm keys (one node
//     per partition, every background key passing the gate) is still
//     published, as the ring's refusals and evictions show;
//   - no background key is published.
func TestPlantedHotKeyFromGen(t *testing.T) {
	const (
		genRate    = 20_000 // events/s
		threshold  = 2000   // events/s over 1 s
		windowMs   = 1000
		slotMs     = windowMs / 10
		coolDownMs = 2000
	)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		var hot []ingest.HotKey
		for _, s := range []string{
			"key=product:42,start=1s,for=3s,share=20%",
			"key=health,start=1s,for=3s,share=20%",
			"key=late-bloomer,start=5s,for=2s,share=20%",
		} {
			h, err := ingest.ParseHotKey(s)
			require.NoError(t, err)
			hot = append(hot, h)
		}
		prod, err := ingest.NewProducer(ingest.ProducerConfig{ProducerOptions: ingest.DefaultProducerOptions(),
			ClientOpts: []kgo.Opt{kgo.SeedBrokers(e.seeds...)}, Topic: e.events, DLQTopic: e.dlq})
		require.NoError(t, err)
		defer prod.Close()
		// 16 background keys, uniform: 1,250 events/s each outside the
		// bursts, 750 to 1,000 during them. All pass the gate (half
		// the threshold per slot) often, none comes near the
		// threshold.
		gen, err := ingest.NewGen(ingest.GenConfig{Keys: 16, S: 0, Rate: genRate, Duration: 8 * time.Second, Seed: 42,
			Hot: hot, App: "shop", Start: start}, prod, nil)
		require.NoError(t, err)
		counts, err := gen.Run(context.Background())
		require.NoError(t, err)
		require.Positive(t, counts["product:42"])

		// The truth, from what is on the topic.
		where := map[string]map[int32]bool{}
		times := map[string][]int64{}
		var lastMs int64
		for _, r := range readAll(t, e.seeds, e.events) {
			var ev schemas.AccessEvent
			require.NoError(t, schemas.DecodeAny(r.Value, &ev))
			if where[ev.Key] == nil {
				where[ev.Key] = map[int32]bool{}
			}
			where[ev.Key][r.Partition] = true
			times[ev.Key] = append(times[ev.Key], ev.TimeMs)
			lastMs = max(lastMs, ev.TimeMs)
		}
		for k := range times {
			slices.Sort(times[k])
		}
		require.EqualValues(t, counts["product:42"], len(times["product:42"]), "the generator's count is what the topic holds")
		// trueOnset is the time of the first event at which the key's
		// count over the window reaches the threshold; trueBelow the
		// first millisecond after it at which the count is below again.
		trueOnset := func(key string) int64 {
			for _, ts := range times[key] {
				if slidingCount(times[key], ts, windowMs) >= threshold*windowMs/1000 {
					return ts
				}
			}
			t.Fatalf("%s never reaches the threshold: the test's schedule is wrong", key)
			return 0
		}
		trueBelow := func(key string, fromMs int64) int64 {
			for ms := fromMs; ms <= lastMs; ms++ {
				if slidingCount(times[key], ms, windowMs) < threshold*windowMs/1000 {
					return ms
				}
			}
			return -1
		}

		cfg := e.config(t)
		cfg.Limits.MaxSkew = 0
		p := pipeline.DefaultOptions()
		p.IdleTimeout = time.Hour
		p.Rules = []pipeline.Rule{{Name: "hot", Key: "*", Window: windowMs * time.Millisecond, Rate: threshold}}
		p.Whitelist = []pipeline.KeyMatch{{Key: "health"}}
		p.Detect.CoolDown = coolDownMs * time.Millisecond
		p.Detect.RingNodes = 1 // at most 2 keys tracked per partition
		cfg.Pipeline = p
		reg := prometheus.NewRegistry()
		cfg.Registerer = reg
		runToEnd(t, cfg)

		byKey := map[string][]*schemas.HotKeyEvent{}
		for _, h := range registryEvents(t, readAll(t, e.seeds, e.hotkeys)) {
			byKey[h.Key] = append(byKey[h.Key], &h)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		require.Equal(t, []string{"late-bloomer", "product:42"}, keys, "only the planted keys that are not whitelisted")

		for _, key := range keys {
			hs := byKey[key]
			require.Equal(t, schemas.HotKeyHot, hs[0].Type, "%s", key)
			h := hs[0]
			require.Len(t, where[key], 1, "%s is keyed to one partition", key)
			require.True(t, where[key][h.Partition], "%s: published from partition %d, the key is on %v", key, h.Partition, where[key])
			require.Equal(t, e.events, h.Topic)
			on := trueOnset(key)
			require.InDelta(t, on, h.OnsetMs, slotMs, "%s: onset %d, true onset %d", key, h.OnsetMs, on)
			trueRate := float64(slidingCount(times[key], h.OnsetMs, windowMs)) * 1000 / windowMs
			require.InEpsilon(t, trueRate, h.Rate, 0.05, "%s: rate at the onset", key)
			require.GreaterOrEqual(t, h.Rate, float64(threshold))
		}

		// Between its hot and its cooled a key at twice the rule is
		// published again with its rate: the key's events in the rule
		// window that ends at the update's slot boundary.
		alerts := map[string][]*schemas.HotKeyEvent{}
		for _, key := range keys {
			for _, h := range byKey[key] {
				if h.Type != schemas.HotKeyUpdate {
					alerts[key] = append(alerts[key], h)
					continue
				}
				atMs := updateAt(t, h)
				n := 0
				for _, ts := range times[key] {
					if ts >= atMs-windowMs && ts < atMs {
						n++
					}
				}
				require.Equal(t, float64(n)*1000/windowMs, h.Rate, "%s: update at %d", key, atMs)
				require.Equal(t, byKey[key][0].OnsetMs, h.OnsetMs)
			}
		}
		require.Greater(t, len(byKey["product:42"]), 2, "product:42 at 4,000/s: updated from its crossing's 2,000/s")
		require.Equal(t, schemas.HotKeyUpdate, byKey["product:42"][1].Type)
		require.InEpsilon(t, 4000, byKey["product:42"][1].Rate, 0.05)
		hs := alerts["product:42"]
		require.Len(t, hs, 2, "product:42: hot once, then cooled: %+v", hs)
		require.Equal(t, schemas.HotKeyCooled, hs[1].Type)
		below := trueBelow("product:42", hs[0].OnsetMs)
		require.Positive(t, below)
		require.InDelta(t, below+coolDownMs, hs[1].OnsetMs, slotMs, "cooled at the end of the cool-down after the key fell below")
		require.Len(t, alerts["late-bloomer"], 1, "late-bloomer: hot once; its burst ends too late to cool in the stream")

		core := func(counter string) float64 {
			fams, err := reg.Gather()
			require.NoError(t, err)
			for _, f := range fams {
				if f.GetName() != "keyheat_detect_pipeline_total" {
					continue
				}
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "counter" && l.GetValue() == counter {
							return m.GetCounter().GetValue()
						}
					}
				}
			}
			return 0
		}
		require.Positive(t, core("ring_refused"), "the ring was full")
		require.Positive(t, core("ring_evicted"), "a hot key took a warm key's node")
		require.Positive(t, core("whitelisted"))
	})
}
