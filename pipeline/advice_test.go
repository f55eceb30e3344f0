package pipeline

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

func TestSplitFor(t *testing.T) {
	for _, tc := range []struct {
		rate, capacity float64
		want           int
	}{
		{0, 1000, 2},    // write-heavy but slow: still at least two keys
		{500, 1000, 2},  // next power of two of 0.5 is 1; a split into one is none
		{1000, 1000, 2}, // exactly one node's worth
		{2000, 1000, 2}, // 2
		{2001, 1000, 4}, // 2.001 → 4
		{4000, 1000, 4}, // 4
		{5000, 1000, 8}, // 5 → 8
		{100000, 1000, 128},
		{1e12, 1, MaxSplit}, // capped at the number of slots
	} {
		require.Equal(t, tc.want, splitFor(tc.rate, tc.capacity), "rate %v capacity %v", tc.rate, tc.capacity)
	}
}

func TestAdvise(t *testing.T) {
	top := []schemas.KeyCount{
		{App: "shop", Key: "reads", Count: 5000, Reads: 4000, Writes: 1000},
		{App: "shop", Key: "writes", Count: 6000, Error: 1000, Reads: 100, Writes: 4900},
		{App: "shop", Key: "tie", Count: 2000, Reads: 1000, Writes: 1000},
		{App: "shop", Key: "cold", Count: 999, Reads: 999},
		{App: "shop", Key: "unknown-ops", Count: 9000},
		{App: "shop", Key: "unwatched", Count: 9000, Reads: 9000},
		{App: "shop", Key: "uncertain", Count: 3000, Error: 2500, Writes: 500},
		{App: "shop", Key: "nan", Count: 9000, Reads: 9000},
	}
	threshold := func(app, key string) (float64, bool) {
		switch key {
		case "unwatched":
			return 0, false
		case "nan":
			return math.NaN(), true
		}
		return 1000, true
	}
	// A 2 s window halves every rate.
	got := advise(top, 2000, threshold, 1000)
	require.Equal(t, []schemas.KeyAdvice{
		{App: "shop", Key: "reads", Rate: 2500, Threshold: 1000, ReadShare: 0.8,
			Mitigation: schemas.Mitigation{Kind: schemas.MitigationLocalCache}},
		{App: "shop", Key: "writes", Rate: 2500, Threshold: 1000, ReadShare: 0.02,
			Mitigation: schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 4}}, // 2450 writes/s over 1000 per node
		{App: "shop", Key: "tie", Rate: 1000, Threshold: 1000, ReadShare: 0.5,
			Mitigation: schemas.Mitigation{Kind: schemas.MitigationLocalCache}},
	}, got, "cold is below its threshold, unknown-ops has no reads or writes, unwatched has no rule, "+
		"uncertain is hot only by its upper bound, nan has no usable threshold")
	require.Nil(t, advise(top, 2000, nil, 1000), "no threshold function, no advice")
}
