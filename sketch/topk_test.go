package sketch

import (
	"cmp"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func newTK(t testing.TB, cfg TopKConfig) *TopK {
	t.Helper()
	tk, err := NewTopK(cfg)
	require.NoError(t, err)
	return tk
}

// checkTopK asserts the TopK's structural invariants and that every key's
// bounds contain its exact count.
func checkTopK(t *testing.T, tk *TopK, exact map[string]uint64) {
	t.Helper()
	for i := range tk.heap {
		e := &tk.heap[i]
		require.Equal(t, uint32(i+1), tk.table[e.slot]&tabIdxMask, "table slot of %q", e.key)
		require.Equal(t, tabFP(e.h), tk.table[e.slot]&^tabIdxMask, "fingerprint in the table slot of %q", e.key)
		require.Equal(t, i, tk.find(e.key, e.h))
		if i > 0 {
			require.False(t, tk.less(i, (i-1)/2), "heap order broken at %d", i)
		}
	}
	for k, c := range exact {
		up, lo := tk.Estimate(k)
		require.LessOrEqual(t, lo, c, "key %q lower bound", k)
		require.GreaterOrEqual(t, up, c, "key %q upper bound", k)
	}
}

func TestTopKConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  TopKConfig
		ok   bool
	}{
		{"zero value", TopKConfig{}, true},
		{"capacity 1", TopKConfig{Capacity: 1}, true},
		{"negative capacity", TopKConfig{Capacity: -1}, false},
		{"capacity over max", TopKConfig{Capacity: MaxTopKCapacity + 1}, false},
		{"bad filter", TopKConfig{Sketch: CountMinConfig{Width: -1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTopK(tc.cfg)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrInvalidConfig)
			}
		})
	}
}

func TestTopKBoundsHoldOnRandomStreams(t *testing.T) {
	for _, tc := range []struct {
		capacity, width, keys int
	}{{1, 8, 50}, {8, 16, 200}, {64, 64, 5000}, {256, 512, 50_000}} {
		tk := newTK(t, TopKConfig{Capacity: tc.capacity, Sketch: CountMinConfig{Width: tc.width}})
		exact := map[string]uint64{}
		r := rand.New(rand.NewPCG(uint64(tc.capacity), 7))
		for i, id := range randomStream(uint64(tc.keys), 40_000, tc.keys) {
			k := keyOf(id)
			w := uint64(1)
			if i%5 == 0 {
				w = 1 + r.Uint64N(1000) // bytes as weight
			}
			exact[k] += w
			if w == 1 && i%2 == 0 {
				tk.Add(k)
			} else {
				tk.AddN(k, w)
			}
		}
		checkTopK(t, tk, exact)
		// Space-Saving's bound: without merges the tracked upper bounds sum
		// to at most N, so the smallest is at most N / Capacity.
		require.LessOrEqual(t, tk.Floor(), tk.Total()/uint64(tc.capacity))
		require.LessOrEqual(t, tk.Len(), tc.capacity)
		require.Equal(t, min(tc.capacity, len(exact)), tk.Len())
	}
}

func TestTopKExactWhileNotFull(t *testing.T) {
	tk := newTK(t, TopKConfig{Capacity: 100, Sketch: CountMinConfig{Depth: 1, Width: 1}})
	for i := range 50 {
		tk.AddN(keyOf(uint64(i)), uint64(i+1))
	}
	top := tk.Top(3)
	require.Equal(t, []Item{
		{Key: "tenant-7:user:49", Count: 50, ID: 49},
		{Key: "tenant-7:user:48", Count: 49, ID: 48},
		{Key: "tenant-7:user:47", Count: 48, ID: 47},
	}, top, "a TopK that never filled counts exactly, even with a 1-counter filter; IDs in admission order")
	require.Zero(t, tk.Floor())
	up, lo := tk.Estimate("never seen")
	require.Zero(t, up)
	require.Zero(t, lo)
}

// TestTopKLateHotKey: a key that turns hot after the TopK filled with
// others is admitted and ends on top.
func TestTopKLateHotKey(t *testing.T) {
	tk := newTK(t, TopKConfig{Capacity: 16, Sketch: CountMinConfig{Width: 1024}})
	for round := range 50 {
		for i := range 32 {
			tk.Add(keyOf(uint64(i + round%2*32)))
		}
	}
	for range 5_000 {
		tk.Add("late")
	}
	top := tk.Top(1)
	require.Equal(t, "late", top[0].Key)
	require.GreaterOrEqual(t, top[0].Count, uint64(5000))
	require.LessOrEqual(t, top[0].Count-top[0].Error, uint64(5000))
}

func TestTopKResetAndZeroWeight(t *testing.T) {
	tk := newTK(t, TopKConfig{Capacity: 4})
	tk.AddN("a", 0)
	require.Zero(t, tk.Len())
	for i := range 10 {
		tk.Add(string(rune('a' + i)))
	}
	tk.Reset()
	require.Zero(t, tk.Len())
	require.Zero(t, tk.Total())
	require.Zero(t, tk.Floor())
	tk.Add("x")
	require.Equal(t, []Item{{Key: "x", Count: 1}}, tk.Top(5))
}

func TestTopKMerge(t *testing.T) {
	cfg := TopKConfig{Capacity: 64, Sketch: CountMinConfig{Width: 256, Seed: 5}}
	parts := []*TopK{newTK(t, cfg), newTK(t, cfg), newTK(t, TopKConfig{Capacity: 32, Sketch: cfg.Sketch})}
	exact := map[string]uint64{}
	for i, id := range randomStream(21, 60_000, 20_000) {
		k := keyOf(id)
		exact[k]++
		parts[i%3].Add(k)
	}
	// Partition-local keys too, as with a key-partitioned topic.
	for p, tk := range parts {
		for range 700 + 100*p {
			k := keyOf(uint64(1_000_000 + p))
			exact[k]++
			tk.Add(k)
		}
	}
	require.NoError(t, parts[0].Merge(parts[1]))
	require.NoError(t, parts[0].Merge(parts[2]))
	m := parts[0]
	require.Equal(t, uint64(60_000+700+800+900), m.Total())
	require.Equal(t, 64, m.Len())
	checkTopK(t, m, exact)
	// The heaviest keys come out in the right order.
	top := m.Top(3)
	require.Equal(t, "tenant-7:user:0", top[0].Key)

	// Merge into an empty TopK reproduces the other's report.
	e := newTK(t, cfg)
	require.NoError(t, e.Merge(m))
	require.Equal(t, m.Top(64), e.Top(64))
}

func TestTopKMergeMismatch(t *testing.T) {
	a := newTK(t, TopKConfig{Sketch: CountMinConfig{Width: 100}})
	b := newTK(t, TopKConfig{Sketch: CountMinConfig{Width: 200}})
	a.Add("k")
	err := a.Merge(b)
	require.ErrorIs(t, err, ErrDimensionMismatch)
	var me *MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, "top-k", me.Kind)
	require.Equal(t, 200, me.OtherWidth)
	require.Equal(t, []Item{{Key: "k", Count: 1}}, a.Top(1))
}

func TestTopKRoundTrip(t *testing.T) {
	tk := newTK(t, TopKConfig{Capacity: 40, Sketch: CountMinConfig{Width: 300, Seed: 77}})
	for _, id := range randomStream(2, 20_000, 3_000) {
		tk.AddN(keyOf(id), id%3+1)
	}
	other := newTK(t, tk.Config())
	other.Add("partition-2-only")
	require.NoError(t, tk.Merge(other)) // exercise a non-zero floor
	b, err := tk.MarshalBinary()
	require.NoError(t, err)
	var got TopK
	require.NoError(t, got.UnmarshalBinary(b))
	require.Equal(t, tk.Top(40), got.Top(40))
	require.Equal(t, tk.Floor(), got.Floor())
	require.Equal(t, tk.Config(), got.Config())
	require.Equal(t, tk.filter, got.filter)
	// The decoded TopK keeps working.
	got.Add("tenant-7:user:0")
	up, _ := got.Estimate("tenant-7:user:0")
	up0, _ := tk.Estimate("tenant-7:user:0")
	require.Equal(t, up0+1, up)
	b2, err := got.MarshalBinary()
	require.NoError(t, err)
	require.NotEqual(t, b, b2)
}

func TestTopKRejectsCorruption(t *testing.T) {
	tk := newTK(t, TopKConfig{Capacity: 4, Sketch: CountMinConfig{Depth: 1, Width: 8}})
	for i := range 20 {
		tk.Add(keyOf(uint64(i % 6)))
	}
	good, err := tk.MarshalBinary()
	require.NoError(t, err)
	for n := range len(good) {
		var d TopK
		require.ErrorIs(t, d.UnmarshalBinary(good[:n]), ErrCorrupt)
	}
	for i := range good {
		b := append([]byte{}, good...)
		b[i] ^= 0x10
		var d TopK
		require.ErrorIs(t, d.UnmarshalBinary(b), ErrCorrupt, "flip at %d", i)
	}
	cms, err := tk.filter.MarshalBinary()
	require.NoError(t, err)
	var d TopK
	require.ErrorContains(t, d.UnmarshalBinary(cms), "bad magic")
}

// TestTopKSteadyStateDoesNotAllocate: once the heavy keys are tracked,
// adding them (and tail keys the filter rejects) allocates nothing.
func TestTopKSteadyStateDoesNotAllocate(t *testing.T) {
	tk := newTK(t, TopKConfig{Capacity: 256, Sketch: CountMinConfig{Width: 4096}})
	keys := make([]string, 10_000)
	for i, id := range randomStream(13, len(keys), 100_000) {
		keys[i] = keyOf(id)
	}
	for range 20 {
		for _, k := range keys {
			tk.Add(k)
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		tk.Add(keys[i%len(keys)])
		i++
	})
	require.Zero(t, allocs)
}

// A flood of new keys, most admitted in place of an evicted one, allocates
// nothing once every entry ID holds room for a key: each admission copies
// its key into the memory of the ID it takes.
func TestTopKNewKeysDoNotAllocate(t *testing.T) {
	tk := newTK(t, TopKConfig{Capacity: 64, Sketch: CountMinConfig{Width: 16}})
	next := uint64(0)
	add := func() (admitted bool) {
		next++
		_, admitted = tk.AddHash(keyOf(next), Hash(keyOf(next)), 1)
		return admitted
	}
	admissions := 0
	for range 10_000 {
		if add() {
			admissions++
		}
	}
	require.Greater(t, admissions, 1000, "a narrow filter admits most new keys")
	keys := make([]string, 20_000)
	for i := range keys {
		keys[i] = keyOf(next + uint64(i) + 1) // same length as the warm-up's
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		tk.AddHash(keys[i], Hash(keys[i]), 1)
		i++
	})
	require.Zero(t, allocs)
}

// Keys reported by Top, and a merged TopK's keys, are copies: evictions,
// Reset and the other TopK's later admissions, which reuse entries'
// memory, do not change them.
func TestTopKKeysOutliveEntries(t *testing.T) {
	a := newTK(t, TopKConfig{Capacity: 8, Sketch: CountMinConfig{Width: 16}})
	b := newTK(t, TopKConfig{Capacity: 8, Sketch: CountMinConfig{Width: 16}})
	for i := range uint64(8) {
		for range i + 1 {
			a.Add(keyOf(i))
			b.Add(keyOf(100 + i))
		}
	}
	top := a.Top(8)
	want := make([]string, len(top))
	for i, it := range top {
		want[i] = strings.Clone(it.Key)
	}
	require.NoError(t, a.Merge(b))
	merged := a.Top(8)
	wantMerged := make([]string, len(merged))
	for i, it := range merged {
		wantMerged[i] = strings.Clone(it.Key)
	}
	b.Reset()
	for i := range uint64(5000) {
		b.Add(keyOf(1000 + i))
	}
	for i, it := range top {
		require.Equal(t, want[i], it.Key, "reported key %d", i)
	}
	got := a.Top(8)
	for i := range got {
		require.Equal(t, wantMerged[i], got[i].Key, "merged key %d after the other TopK's admissions", i)
		require.Equal(t, wantMerged[i], merged[i].Key)
	}
	a.Reset()
	for i := range uint64(5000) {
		a.Add(keyOf(9000 + i))
	}
	for i := range merged {
		require.Equal(t, wantMerged[i], merged[i].Key, "reported key %d after Reset and new admissions", i)
	}

	// Reported from entries whose keys live in the TopK's own memory, which
	// keys of the same length then reuse.
	c := newTK(t, TopKConfig{Capacity: 8, Sketch: CountMinConfig{Width: 16}})
	for i := range uint64(8) {
		c.Add(keyOf(10_000 + i))
	}
	reported := c.Top(8)
	for i := range uint64(5000) {
		c.Add(keyOf(20_000 + i)) // evictions: new keys take the IDs
	}
	c.Reset()
	for i := range uint64(8) {
		c.Add(keyOf(30_000 + i))
	}
	for _, it := range reported {
		require.Equal(t, keyOf(10_000+uint64(it.ID)), it.Key, "reported key of ID %d after its ID's memory was reused", it.ID)
	}
}

// TestMemoryDoesNotGrowWithDistinctKeys feeds 10× more distinct keys and
// checks both the accounted Bytes and the live heap stay put.
func TestMemoryDoesNotGrowWithDistinctKeys(t *testing.T) {
	cm, err := NewCountMin(CountMinConfig{})
	require.NoError(t, err)
	tk := newTK(t, TopKConfig{})
	card, err := NewCardinality(CardinalityConfig{})
	require.NoError(t, err)
	feed := func(from, to uint64) {
		for id := from; id < to; id++ {
			k := keyOf(10_000_000 + id) // fixed 22-byte keys
			cm.Add(k)
			tk.Add(k)
			card.Add(k)
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	feed(0, 50_000)
	bytes1 := cm.Bytes() + tk.Bytes() + card.Bytes()
	heap1 := heap()
	feed(50_000, 500_000)
	bytes2 := cm.Bytes() + tk.Bytes() + card.Bytes()
	heap2 := heap()
	t.Logf("default count-min + top-K + cardinality: %d B accounted; live heap %d → %d B after 50k → 500k distinct keys", bytes2, heap1, heap2)
	require.Equal(t, bytes1, bytes2)
	require.Equal(t, 64<<10+DefaultTopKCapacity*TopKEntryBytes(22)+TopKTableBytes(DefaultTopKCapacity)+64<<10+16<<10, bytes2)
	// 450k more distinct keys held in a map would take tens of MB.
	require.Less(t, int64(heap2)-int64(heap1), int64(1<<20))
	runtime.KeepAlive(cm)
	runtime.KeepAlive(tk)
	runtime.KeepAlive(card)
}

// AppendTracked lists every tracked key once, with the bounds and IDs Top
// gives, in no order and without copying or allocating beyond dst.
func TestTopKAppendTracked(t *testing.T) {
	tk := newTK(t, TopKConfig{Capacity: 64, Sketch: CountMinConfig{Width: 64}})
	for i, id := range randomStream(500, 20_000, 500) {
		tk.AddN(keyOf(id), uint64(1+i%3))
	}
	top := tk.Top(tk.Len())
	got := tk.AppendTracked(nil)
	require.Len(t, got, tk.Len())
	slices.SortFunc(got, func(a, b Item) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(b.Count-b.Error, a.Count-a.Error), strings.Compare(a.Key, b.Key))
	})
	require.Equal(t, top, got)
	buf := make([]Item, 0, tk.Len())
	require.Zero(t, testing.AllocsPerRun(10, func() { buf = tk.AppendTracked(buf[:0]) }))
}

// With a slack, every bound still holds, directly and through the binary
// form (whose floor then covers the slack), Floor stays within Space-
// Saving's N/Capacity plus the slack, and a flat tail churns the tracked
// set less.
func TestTopKSlack(t *testing.T) {
	admissions := map[uint64]int{}
	for _, slack := range []uint64{0, 1, 4, 16} {
		tk := newTK(t, TopKConfig{Capacity: 64, Sketch: CountMinConfig{Width: 128}, Slack: slack})
		exact := map[string]uint64{}
		r := rand.New(rand.NewPCG(slack, 9))
		for i := range 50_000 {
			// A few heavy keys over a flat tail of 20,000.
			id := uint64(r.IntN(20_000))
			if i%5 == 0 {
				id = uint64(r.IntN(10))
			}
			k := keyOf(id)
			exact[k]++
			if _, admitted := tk.AddHash(k, Hash(k), 1); admitted {
				admissions[slack]++
			}
		}
		checkTopK(t, tk, exact)
		require.LessOrEqual(t, tk.Floor(), tk.Total()/64+slack, "slack %d", slack)
		for _, it := range tk.Top(10) {
			require.Less(t, it.Error, it.Count, "slack %d: the heavy keys are tracked", slack)
		}
		b, err := tk.MarshalBinary()
		require.NoError(t, err)
		var back TopK
		require.NoError(t, back.UnmarshalBinary(b))
		checkTopK(t, &back, exact)
		require.Equal(t, tk.Floor(), back.Floor(), "slack %d: the decoded floor covers the slack", slack)
	}
	require.Less(t, admissions[4], admissions[0]/2, "a slack of 4 halves the churn at least: %v", admissions)
}
