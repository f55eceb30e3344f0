package ingest

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

func TestParseHotKey(t *testing.T) {
	h, err := ParseHotKey("key=product:42,start=10s,for=30s,share=5%")
	require.NoError(t, err)
	require.Equal(t, HotKey{Key: "product:42", Start: 10 * time.Second, For: 30 * time.Second, Share: 0.05}, h)
	for _, bad := range []string{"", "key=a", "key=a,for=1s", "key=a,for=1s,share=0", "key=a,for=1s,share=120%",
		"start=1s,for=1s,share=1%", "key=a,for=1s,share=1%,color=red", "key=a,for=-1s,share=1%"} {
		_, err := ParseHotKey(bad)
		require.Error(t, err, bad)
	}
}

// TestGenPlantedCount runs the generator with a planted key on a schedule
// and checks that the count it reports is the count on the topic, and
// that the same seed plants the same number again.
func TestGenPlantedCount(t *testing.T) {
	brokers(t, func(t *testing.T, seeds []string) {
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
