package pipeline

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// TestSumSlotsMatchesMap holds sumSlots, which reads the slots it touched
// from a bitmap, to a map's sums on lists of few and many slots, with
// slots of no events among them.
func TestSumSlotsMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	m, err := NewMerger(testMergerConfig(10))
	require.NoError(t, err)
	for i := range 200 {
		var lists [][]schemas.SlotCount
		want := map[uint16]uint64{}
		n := []int{0, 5, 500, 3000}[r.IntN(4)]
		for range 1 + r.IntN(5) {
			seen := map[uint16]bool{}
			var l []schemas.SlotCount
			for range n {
				slot := uint16(r.IntN(RedisSlots))
				if seen[slot] {
					continue
				}
				seen[slot] = true
				events := uint64(r.IntN(3))
				l = append(l, schemas.SlotCount{Slot: slot, Events: events})
				if events > 0 {
					want[slot] += events
				}
			}
			slices.SortFunc(l, func(a, b schemas.SlotCount) int { return int(a.Slot) - int(b.Slot) })
			lists = append(lists, l)
		}
		var wantList []schemas.SlotCount
		for slot, events := range want {
			wantList = append(wantList, schemas.SlotCount{Slot: slot, Events: events})
		}
		slices.SortFunc(wantList, func(a, b schemas.SlotCount) int { return int(a.Slot) - int(b.Slot) })
		require.Equal(t, wantList, m.sumSlots(lists), "case %d", i)
	}
}
