package sketch

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The ...Hash methods must agree exactly with the methods that take the key,
// seeded or not, so a caller may hash once and mix the two forms.
func TestHashEntryPointsAgreeWithKeyForms(t *testing.T) {
	for _, seed := range []uint64{0, 42} {
		cfg := CountMinConfig{Depth: 4, Width: 256, Seed: seed}
		byKey, err := NewCountMin(cfg)
		require.NoError(t, err)
		byHash, err := NewCountMin(cfg)
		require.NoError(t, err)
		r := rand.New(rand.NewPCG(seed, 1))
		for range 5000 {
			k := keyOf(r.Uint64N(300))
			n := 1 + r.Uint64N(5)
			byKey.AddN(k, n)
			est := byHash.AddHash(Hash(k), n)
			require.Equal(t, byKey.Estimate(k), est, "seed %d: AddHash estimate of %q", seed, k)
			require.Equal(t, byKey.Estimate(k), byHash.EstimateHash(Hash(k)), "seed %d: EstimateHash of %q", seed, k)
		}
		require.Equal(t, byKey.counters, byHash.counters, "seed %d: counters", seed)

		cons := cfg
		cons.Conservative = true
		a, _ := NewCountMin(cons)
		b, _ := NewCountMin(cons)
		for i := range uint64(3000) {
			k := keyOf(i % 97)
			a.Add(k)
			require.Equal(t, a.Estimate(k), b.AddHash(Hash(k), 1), "conservative estimate of %q", k)
		}
	}

	x, _ := NewCardinality(CardinalityConfig{})
	y, _ := NewCardinality(CardinalityConfig{})
	for i := range uint64(20_000) {
		x.Add(keyOf(i))
		y.AddHash(Hash(keyOf(i)))
	}
	require.Equal(t, x.Estimate(), y.Estimate())
}

// AddHash's IDs: in [0, Capacity), unique among tracked keys, stable while
// a key stays tracked, taken over by the key admitted in an evicted key's
// place, and reported by Top.
func TestTopKAddHashIDs(t *testing.T) {
	const capacity = 16
	for _, seed := range []uint64{0, 9} {
		byKey := newTK(t, TopKConfig{Capacity: capacity, Sketch: CountMinConfig{Width: 64, Seed: seed}})
		tk := newTK(t, TopKConfig{Capacity: capacity, Sketch: CountMinConfig{Width: 64, Seed: seed}})
		owner := map[int32]string{} // id -> key holding it
		z := rand.NewZipf(rand.New(rand.NewPCG(seed, 3)), 1.2, 1, 200)
		exact := map[string]uint64{}
		for range 20_000 {
			k := keyOf(z.Uint64())
			exact[k]++
			byKey.Add(k)
			id, admitted := tk.AddHash(k, Hash(k), 1)
			tracked := map[string]int32{}
			for _, it := range tk.Top(capacity) {
				tracked[it.Key] = it.ID
			}
			got, isTracked := tracked[k]
			if id < 0 {
				require.False(t, admitted)
				require.False(t, isTracked, "%q untracked by AddHash but in Top", k)
				continue
			}
			require.True(t, isTracked, "%q has id %d but is not in Top", k, id)
			require.Equal(t, id, got, "Top reports the ID AddHash returned for %q", k)
			require.Less(t, id, int32(capacity))
			if admitted {
				owner[id] = k
			} else {
				require.Equal(t, k, owner[id], "id %d changed owner without an admission", id)
			}
			seen := map[int32]bool{}
			for key, i := range tracked {
				require.False(t, seen[i], "id %d used twice (%q)", i, key)
				seen[i] = true
				require.Equal(t, key, owner[i], "owner of id %d", i)
			}
		}
		// The hashed form changes nothing else: same reports as Add.
		a, b := byKey.Top(capacity), tk.Top(capacity)
		for i := range a {
			a[i].ID, b[i].ID = 0, 0
		}
		require.Equal(t, a, b)
		checkTopK(t, tk, exact)
	}
}
