package pipeline

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/sketch"
)

// countKey counts one event of app's key as appAgg.add does, and reports
// whether the table holds the key.
func countKey(t *exactTable, app uint16, key string, nb, rd, wr, lat uint64) bool {
	h := sketch.Hash(key)
	e := t.lookup(h, app, key)
	if e == nil && !t.full {
		e = t.insert(h, app, key)
	}
	if e == nil {
		return false
	}
	t.count(e, nb, rd, wr, lat)
	return true
}

// The table agrees with a map: every key it holds has every figure exact,
// through growth from its first size to its bound, short keys inside their
// entries and long ones in the arena, the same key in two apps as two keys.
func TestExactTableAgreesWithMap(t *testing.T) {
	type fig struct{ events, bytes, reads, writes, lat uint64 }
	type ak struct {
		app uint16
		key string
	}
	tab := newExactTable(10_000, 1<<20, 0)
	exact := map[ak]*fig{}
	for i := range 60_000 {
		k := "k:" + strconv.Itoa(i*7919%4000)
		if i%3 == 0 {
			k = strings.Repeat("long-", 6) + k // over exactInline: in the arena
		}
		app := uint16(i % 2)
		rd, wr := uint64(i%2), uint64(1-i%2)
		require.True(t, countKey(tab, app, k, uint64(i%100), rd, wr, 7))
		f := exact[ak{app, k}]
		if f == nil {
			f = &fig{}
			exact[ak{app, k}] = f
		}
		*f = fig{f.events + 1, f.bytes + uint64(i%100), f.reads + rd, f.writes + wr, f.lat + 7}
	}
	require.Len(t, tab.ents, len(exact))
	require.False(t, tab.full)
	for i := range tab.ents {
		e := &tab.ents[i]
		r, w := tab.readsWrites(int32(i))
		f := exact[ak{e.app, tab.key(e)}]
		require.NotNil(t, f, "%q", tab.key(e))
		require.Equal(t, *f, fig{e.events, e.bytes, r, w, e.latencyUs}, "%q", tab.key(e))
	}
}

// The first key past the bound makes the table full for the window: that
// key and every new one are refused, while the keys it holds keep counting.
// A reset empties it for the next window, which may hold other keys.
func TestExactTableFullIsSticky(t *testing.T) {
	for _, tc := range []struct {
		name       string
		keys, byts int
	}{{"keys", 3, 1 << 10}, {"key bytes", 100, 9}} {
		t.Run(tc.name, func(t *testing.T) {
			tab := newExactTable(tc.keys, tc.byts, 0)
			require.True(t, countKey(tab, 0, "aaa", 1, 1, 0, 1))
			require.True(t, countKey(tab, 0, "bbb", 1, 1, 0, 1))
			require.True(t, countKey(tab, 0, "ccc", 1, 1, 0, 1))
			require.False(t, countKey(tab, 0, "dddd", 1, 1, 0, 1), "no room")
			require.True(t, tab.full)
			require.False(t, countKey(tab, 0, "e", 1, 1, 0, 1), "full stays full, even for a key that would fit")
			require.True(t, countKey(tab, 0, "aaa", 1, 1, 0, 1), "a key it holds still counts")
			require.Equal(t, uint64(2), tab.lookup(sketch.Hash("aaa"), 0, "aaa").events)
			tab.reset()
			require.False(t, tab.full)
			require.Empty(t, tab.ents)
			require.True(t, countKey(tab, 0, "e", 1, 1, 0, 1))
			require.Nil(t, tab.lookup(sketch.Hash("aaa"), 0, "aaa"), "gone with the window")
		})
	}
}

// Once full, the table answers most lookups of keys it does not hold from
// its Bloom filter, and never misses one it holds.
func TestExactTableFullFindsWhatItHolds(t *testing.T) {
	tab := newExactTable(4096, 1<<20, 0)
	for i := 0; !tab.full; i++ {
		countKey(tab, 0, "held:"+strconv.Itoa(i), 1, 0, 0, 0)
	}
	for i := range 4096 {
		k := "held:" + strconv.Itoa(i)
		require.NotNil(t, tab.lookup(sketch.Hash(k), 0, k), k)
	}
	passed := 0
	for i := range 10_000 {
		if tab.mayHold(sketch.Hash("other:" + strconv.Itoa(i))) {
			passed++
		}
	}
	require.Less(t, passed, 1000, "the Bloom filter lets through %d of 10,000 keys it does not hold", passed)
}

// Reset clears exactly the slots used, whether it clears them one by one
// (few keys) or the whole index (many), and a reset table grows no more:
// the next window starts with its room.
func TestExactTableReset(t *testing.T) {
	for _, n := range []int{10, 3000} {
		tab := newExactTable(1<<14, 1<<20, 0)
		for round := range 3 {
			for i := range n {
				require.True(t, countKey(tab, 0, "r"+strconv.Itoa(round)+":"+strconv.Itoa(i), 1, 0, 0, 0))
			}
			used := 0
			for _, v := range tab.index {
				if v != 0 {
					used++
				}
			}
			require.Equal(t, n, used, "round %d: one slot per key", round)
			size := len(tab.index)
			tab.reset()
			require.Equal(t, size, len(tab.index), "the index keeps its size")
			for _, v := range tab.index {
				require.Zero(t, v, "round %d, %d keys: reset clears every slot", round, n)
			}
			for _, v := range tab.bloom {
				require.Zero(t, v, "round %d, %d keys: reset clears the Bloom filter", round, n)
			}
		}
	}
}

// Reads and writes, counted in 32 bits, carry what passes 2^32 so that
// they stay exact.
func TestExactTableReadsCarry(t *testing.T) {
	tab := newExactTable(4, 1<<10, 0)
	require.True(t, countKey(tab, 0, "k", 0, 1, 0, 0))
	require.True(t, countKey(tab, 0, "j", 0, 0, 1, 0))
	tab.ents[0].reads = math.MaxUint32
	tab.ents[1].writes = math.MaxUint32
	for range 3 {
		require.True(t, countKey(tab, 0, "k", 0, 1, 0, 0))
		require.True(t, countKey(tab, 0, "j", 0, 0, 1, 0))
	}
	r, w := tab.readsWrites(0)
	require.Equal(t, [2]uint64{math.MaxUint32 + 3, 0}, [2]uint64{r, w})
	r, w = tab.readsWrites(1)
	require.Equal(t, [2]uint64{0, math.MaxUint32 + 3}, [2]uint64{r, w})
	tab.reset()
	require.Nil(t, tab.high)
}

// A table starts with the room the hint asks for (bounded by its keys),
// so a window as busy as the last one does not grow its table again.
func TestExactTableHint(t *testing.T) {
	require.Equal(t, exactMinKeys, cap(newExactTable(1<<16, 1<<20, 0).ents))
	require.Equal(t, 5000, cap(newExactTable(1<<16, 1<<20, 5000).ents))
	require.Equal(t, 1000, cap(newExactTable(1000, 1<<20, 5000).ents))
	require.Equal(t, int64(1000*64+2048*4+128*8+32<<10+1<<20), exactBound(1000, 1<<20))
}

// keyPrefix orders keys as strings.Compare does wherever their prefixes
// differ, keys shorter than 8 bytes and keys with zero bytes included.
func TestKeyPrefixOrder(t *testing.T) {
	keys := []string{"", "\x00", "\x00\x00", "a", "a\x00", "ab", "abcdefg", "abcdefgh", "abcdefgh\x00", "abcdefghi",
		"abcdefgi", "b", "key:1", "key:12345", "key:1234", "key:9", "\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\xff"}
	for _, a := range keys {
		for _, b := range keys {
			pa, pb := keyPrefix(a), keyPrefix(b)
			if pa == pb {
				continue
			}
			want := strings.Compare(a, b)
			got := -1
			if pa > pb {
				got = 1
			}
			require.Equal(t, want, got, "%q vs %q", a, b)
		}
	}
}
