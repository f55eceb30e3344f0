package pipeline

import (
	"cmp"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// referenceRanking is a scope's rankings as reports selected them before
// rankScope: every key compared as a KeyCount, keys without a figure
// ranked last and then dropped.
func referenceRanking(keys []schemas.KeyCount, topN int) *scopeRanking {
	rk := &scopeRanking{top: selectTop(keys, topN+1, func(a, b *schemas.KeyCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count-b.Error, a.Count-a.Error); c != 0 {
			return c
		}
		return compareAppKey(a, b)
	})}
	for f := range keyFigure(numFigures) {
		out := selectTop(keys, topN, func(a, b *schemas.KeyCount) int {
			if c := cmp.Compare(f.of(b), f.of(a)); c != 0 {
				return c
			}
			if c := cmp.Compare(b.Count, a.Count); c != 0 {
				return c
			}
			return compareAppKey(a, b)
		})
		for len(out) > 0 && f.of(&out[len(out)-1]) == 0 {
			out = out[:len(out)-1]
		}
		if len(out) > 0 {
			rk.figs[f] = out
		}
	}
	return rk
}

// randomScopeKeys is n distinct keys of app, with figures from a range
// of size spread (1: all tied) and keys that share long prefixes, are
// shorter than 8 bytes, or end in zero bytes.
func randomScopeKeys(r *rand.Rand, app string, n int, spread uint64) []schemas.KeyCount {
	seen := map[string]bool{}
	var keys []schemas.KeyCount
	for len(keys) < n {
		var k string
		switch r.IntN(4) {
		case 0:
			k = "key:" + strconv.Itoa(r.IntN(100_000))
		case 1:
			k = strconv.Itoa(r.IntN(1000))
		case 2:
			k = "k" + strings.Repeat("\x00", r.IntN(9))
		default:
			k = strings.Repeat("p", 6+r.IntN(4)) + strconv.Itoa(r.IntN(50))
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		count := 1 + r.Uint64N(spread)
		kc := schemas.KeyCount{App: app, Key: k, Count: count, Error: r.Uint64N(count + 1), Partition: -1}
		if r.IntN(2) == 0 {
			kc.Bytes = r.Uint64N(spread)
		}
		if r.IntN(2) == 0 {
			kc.Reads = r.Uint64N(spread)
		}
		if r.IntN(4) == 0 {
			kc.Writes = r.Uint64N(spread)
		}
		if r.IntN(8) == 0 {
			kc.LatencyUs = r.Uint64N(spread)
		}
		keys = append(keys, kc)
	}
	return keys
}

// TestRankScopeMatchesWhole holds rankScope and rankParts to the
// selection over every key compared as a KeyCount: one app's keys, keys
// of several apps together (as OtherApp gathers them), and the union of
// several apps' scopes ranked from their rankings (as the cluster's).
func TestRankScopeMatchesWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 300 {
		topN := 1 + r.IntN(20)
		m, err := NewMerger(testMergerConfig(topN))
		require.NoError(t, err)
		spread := []uint64{1, 3, 1000}[r.IntN(3)]
		var parts []*scopeRanking
		var all []schemas.KeyCount
		for a := range 1 + r.IntN(4) {
			keys := randomScopeKeys(r, "a"+strconv.Itoa(3-a), r.IntN(60), spread)
			all = append(all, keys...)
			got := m.rankScope(keys)
			require.Equal(t, referenceRanking(keys, topN), got, "case %d app %d: one app's scope", i, a)
			parts = append(parts, got)
		}
		require.Equal(t, referenceRanking(all, topN), m.rankScope(all), "case %d: several apps' keys together", i)
		require.Equal(t, referenceRanking(all, topN), m.rankParts(parts), "case %d: several apps from their rankings", i)
	}
}
