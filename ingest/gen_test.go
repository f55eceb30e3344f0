package ingest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func TestParseHotKey(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want HotKey
		err  string // "": valid
	}{
		{"key=product:42,start=10s,for=30s,share=5%", HotKey{Key: "product:42", Start: 10 * time.Second, For: 30 * time.Second, Share: 0.05}, ""},
		{"key=a,share=0.5%", HotKey{Key: "a", For: forever, Share: 0.005}, ""},
		{" key=a , share=100% ", HotKey{Key: "a", For: forever, Share: 1}, ""},
		{"share=150%", HotKey{}, "share: 150% is outside (0%, 100%]"},
		{"key=a,share=150%", HotKey{}, "share: 150% is outside (0%, 100%]"},
		{"key=a,share=0%", HotKey{}, "share: 0% is outside (0%, 100%]"},
		{"key=a,share=5", HotKey{}, `share: "5" has no % sign; give a percentage, e.g. share=5%`},
		{"key=a,share=0.05", HotKey{}, `share: "0.05" has no % sign`},
		{"key=a,share=x%", HotKey{}, `share: "x%" is not a percentage`},
		{"key=a,share=NaN%", HotKey{}, `share: "NaN%" is not a percentage`},
		{"key=a", HotKey{}, "share: required"},
		{"share=5%", HotKey{}, "key: required"},
		{"key=,share=5%", HotKey{}, "key: must not be empty"},
		{"", HotKey{}, `"" is not name=value`},
		{"key=a,share=5%,for=-1s", HotKey{}, "for: -1s is not positive"},
		{"key=a,share=5%,for=0s", HotKey{}, "for: 0s is not positive"},
		{"key=a,share=5%,for=soon", HotKey{}, `for: "soon" is not a duration like 10s or 1m30s`},
		{"key=a,share=5%,start=-1s", HotKey{}, "start: -1s is negative"},
		{"key=a,share=5%,start=10", HotKey{}, `start: "10" is not a duration`},
		{"key=a,share=5%,color=red", HotKey{}, `unknown field "color" (fields: key, share, start, for)`},
		{"key=a,key=b,share=5%", HotKey{}, "key is given twice"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			h, err := ParseHotKey(tc.spec)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, fmt.Sprintf("hot key %q: ", tc.spec), "the spec is named")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, h)
		})
	}
}

// TestNewGenChecks: every unusable setting is refused, naming it; a
// planted key without for= lasts the whole run.
func TestNewGenChecks(t *testing.T) {
	ok := GenConfig{Keys: 10, S: 1.1, Count: 1}
	for _, tc := range []struct {
		name string
		mod  func(*GenConfig)
		err  string
	}{
		{"defaults", func(*GenConfig) {}, ""},
		{"uniform", func(c *GenConfig) { c.S = 0 }, ""},
		{"no keys", func(c *GenConfig) { c.Keys = 0 }, "gen: keys 0 is outside 1..10000000"},
		{"negative keys", func(c *GenConfig) { c.Keys = -1 }, "gen: keys -1 is outside 1..10000000"},
		{"negative zipf", func(c *GenConfig) { c.S = -1 }, "Zipf exponent"},
		{"no end", func(c *GenConfig) { c.Count = 0 }, "set a duration or a count"},
		{"negative count", func(c *GenConfig) { c.Count = -5; c.Duration = time.Minute }, "gen: count -5 is negative; 0 means no limit"},
		{"negative duration", func(c *GenConfig) { c.Duration = -time.Second }, "gen: duration -1s is negative; 0 means no limit"},
		{"a key planted twice", func(c *GenConfig) {
			c.Hot = []HotKey{{Key: "a", For: time.Minute, Share: 0.1}, {Key: "a", Start: time.Hour, For: time.Minute, Share: 0.1}}
		}, `gen: key "a" is planted twice; give each --hot its own key`},
		{"shares above 100% forever", func(c *GenConfig) {
			c.Hot = []HotKey{{Key: "a", For: forever, Share: 0.6}, {Key: "b", Start: time.Hour, For: forever, Share: 0.6}}
		}, "gen: planted shares add up to 120% at 1h0m0s"},
		{"shares apart in time", func(c *GenConfig) {
			c.Hot = []HotKey{{Key: "a", For: time.Minute, Share: 0.6}, {Key: "b", Start: time.Minute, For: forever, Share: 0.6}}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mod(&cfg)
			_, err := NewGen(cfg, nil, nil)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestGenPlantedCount runs the generator with a planted key on a schedule
// and checks that the count it reports is the count on the topic, and
// that the same seed plants the same number again.
func TestGenPlantedCount(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 3)
		cfg := GenConfig{Keys: 1000, S: 1.1, Rate: 1e6, Count: 20_000, Seed: 7,
			Hot:   []HotKey{{Key: "product:42", Start: 5 * time.Millisecond, For: 10 * time.Millisecond, Share: 0.3}},
			Start: time.UnixMilli(1742220131000)}
		run := func() map[string]int64 {
			g, err := NewGen(cfg, k.producer(t, schemas.JSON), nil)
			require.NoError(t, err)
			counts, err := g.Run(context.Background())
			require.NoError(t, err)
			return counts
		}
		counts := run()
		// 10,000 events fall in the window; 30% of them are planted.
		require.InDelta(t, 3000, counts["product:42"], 300)

		onTopic := 0
		recs := readAll(t, k.seeds, k.events)
		require.Len(t, recs, 20_000)
		for _, r := range recs {
			if string(r.Key) == "product:42" {
				onTopic++
				var e schemas.AccessEvent
				require.NoError(t, schemas.DecodeAny(r.Value, &e))
				ms := e.TimeMs - cfg.Start.UnixMilli()
				require.True(t, ms >= 5 && ms < 15, "planted event at +%dms, outside its window", ms)
			}
		}
		require.Equal(t, counts["product:42"], int64(onTopic))
		require.Equal(t, counts, run(), "same seed, same plant")
	})
}

// TestAliasMatchesWeights draws from a small alias table and checks each
// rank's frequency against its weight, within 5 standard deviations.
func TestAliasMatchesWeights(t *testing.T) {
	w := []float64{1, 1.0 / 2, 1.0 / 3, 1.0 / 4, 1.0 / 5, 0, 1.0 / 7}
	total := 0.0
	for _, x := range w {
		total += x
	}
	tab := newAlias(w)
	rng := rand.New(rand.NewPCG(1, 2))
	const draws = 1_000_000
	got := make([]int, len(w))
	for range draws {
		got[drawAlias(tab, rng.Uint64())]++
	}
	for i, x := range w {
		p := x / total
		sd := math.Sqrt(draws * p * (1 - p))
		require.InDelta(t, draws*p, float64(got[i]), 5*sd+1, "rank %d", i)
	}
	require.Zero(t, got[5], "a zero weight is never drawn")
}
