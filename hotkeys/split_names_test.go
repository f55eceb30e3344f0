package hotkeys

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// splitTestKeys are keys of every shape a shard name must cope with:
// plain, tagged (whose tag a suffix could not escape), braces without a
// tag, binary, empty.
func splitTestKeys(rng *rand.Rand, n int) []string {
	keys := []string{"", "foo", "{user1000}.followers", "{}", "a}b", "{x", "x{}y{z}", "\x00\xff{\x00}", strings.Repeat("k", 1000)}
	for len(keys) < n {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
			if rng.IntN(8) == 0 {
				b[i] = "{}:"[rng.IntN(3)]
			}
		}
		if rng.IntN(3) == 0 {
			b = append([]byte("{tenant-"+string(rune('a'+rng.IntN(26)))+"}:"), b...)
		}
		keys = append(keys, string(b))
	}
	return keys
}

// TestSplitShardSlots: the N shards of a key sit on N distinct slots,
// none of them the key's, for every factor and key shape, including keys
// with a hash tag of their own; the names are a function of the key alone,
// and the shards of factor N are the first N of factor 2N.
func TestSplitShardSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, key := range splitTestKeys(rng, 2000) {
		big := newSplitNames(key)
		big.grow(64)
		for n := 2; n <= 64; n *= 2 {
			names := newSplitNames(key)
			names.grow(n)
			slots := map[int]bool{Slot(key): true}
			for i := range n {
				shard := names.shard(i)
				require.Equal(t, big.shard(i), shard, "shard %d of %q under factor %d and 64", i, key, n)
				require.True(t, strings.HasSuffix(shard, "}s:"+key), "shard name %q ends with the key", shard)
				s := Slot(shard)
				require.Equal(t, int(names.slotOf(int(names.cands[i]))), s, "slot of %q", shard)
				require.False(t, slots[s], "key %q factor %d: shard %d on slot %d, taken by the key or an earlier shard", key, n, i, s)
				slots[s] = true
				require.Equal(t, s, Slot(names.foldRec(i)), "a fold record shares its shard's slot")
			}
		}
	}
	// The greedy choice works up to the largest factor.
	names := newSplitNames("product:42")
	names.grow(MaxSplitFactor)
	slots := map[int]bool{Slot("product:42"): true}
	for i := range MaxSplitFactor {
		s := Slot(names.shard(i))
		require.False(t, slots[s], "shard %d", i)
		slots[s] = true
	}
}

// TestSplitFoldsKeySlot: the set of noted cluster folds sits on its key's
// slot, whatever the key's shape.
func TestSplitFoldsKeySlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, key := range splitTestKeys(rng, 2000) {
		require.Equal(t, Slot(key), Slot(splitFoldsKey(key)), "key %q: %q", key, splitFoldsKey(key))
	}
}

func BenchmarkSplitNames(b *testing.B) {
	for _, n := range []int{4, 64} {
		b.Run("factor="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				names := newSplitNames("tenant-7:user:123456")
				names.grow(n)
				_ = names.shard(n - 1)
			}
		})
	}
}
