package pipeline

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

func TestGiniAndMaxMean(t *testing.T) {
	for _, tc := range []struct {
		name    string
		loads   []uint64
		gini    float64
		maxMean float64
	}{
		// Hand-computed with G = Σ (2i − n − 1)·xᵢ / (n·S), xᵢ ascending.
		{"none", nil, 0, 0},
		{"no load", []uint64{0, 0, 0}, 0, 0},
		{"one partition", []uint64{7}, 0, 1},
		{"even", []uint64{5, 5, 5, 5}, 0, 1},
		// (−3·1 − 1·2 + 1·3 + 3·4) / (4·10) = 10/40; max/mean = 4/2.5.
		{"1 2 3 4", []uint64{4, 1, 3, 2}, 0.25, 1.6},
		// All on one of four: 3·8 / (4·8) = (n−1)/n; max/mean = 8/2.
		{"all on one of four", []uint64{0, 8, 0, 0}, 0.75, 4},
		// (−1·1 + 1·3) / (2·4) = 2/8; max/mean = 3/2.
		{"1 3", []uint64{1, 3}, 0.25, 1.5},
		// (−2·0 + 0·0 + 2·10) / (3·10) = 2/3; max/mean = 10/(10/3).
		{"all on one of three", []uint64{10, 0, 0}, 2.0 / 3, 3},
		// (−4·1 −2·1 + 0·1 + 2·1 + 4·96) / (5·100) = 380/500.
		{"one hot of five", []uint64{1, 96, 1, 1, 1}, 0.76, 4.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.gini, gini(tc.loads), 1e-12, "gini")
			require.InDelta(t, tc.maxMean, maxMean(tc.loads), 1e-12, "max/mean")
		})
	}
	require.Equal(t, 0.0, gini([]uint64{1 << 40, 1 << 40, 1 << 40}), "equal loads give exactly 0")
	loads := []uint64{3, 1, 2}
	gini(loads)
	require.Equal(t, []uint64{3, 1, 2}, loads, "gini leaves its input alone")
}

func TestSlotSkew(t *testing.T) {
	layout, err := RedisClusterOptions{Nodes: []string{"r1", "r2", "r3"}}.layout()
	require.NoError(t, err)
	slots := []schemas.SlotCount{{Slot: 0, Events: 10}, {Slot: 5460, Events: 10}, {Slot: 5461, Events: 60}, {Slot: 16383, Events: 20}}
	var s schemas.Skew
	slotSkew(&s, slots, layout, 3)
	require.Equal(t, []schemas.NodeLoad{
		{Node: "r1", FirstSlot: 0, LastSlot: 5460, Events: 20, Share: 0.2},
		{Node: "r2", FirstSlot: 5461, LastSlot: 10922, Events: 60, Share: 0.6},
		{Node: "r3", FirstSlot: 10923, LastSlot: 16383, Events: 20, Share: 0.2},
	}, s.Nodes)
	require.InDelta(t, 1.8, s.NodeMaxMean, 1e-12, "60 / (100/3)")
	// sorted 20 20 60: (−2·20 + 0 + 2·60) / (3·100) = 80/300.
	require.InDelta(t, 80.0/300, s.NodeGini, 1e-12)
	require.Equal(t, []schemas.SlotCount{{Slot: 5461, Events: 60}, {Slot: 16383, Events: 20}, {Slot: 0, Events: 10}}, s.HotSlots,
		"busiest first, ties by slot")

	layout, err = RedisClusterOptions{Ranges: []NodeSlots{{"a", 0, 99}, {"b", 100, 16000}, {"a", 16001, 16383}}}.layout()
	require.NoError(t, err)
	s = schemas.Skew{}
	slotSkew(&s, slots, layout, 0)
	require.Equal(t, []schemas.NodeLoad{
		{Node: "a", FirstSlot: 0, LastSlot: 16383, Ranges: []schemas.SlotRange{{First: 0, Last: 99}, {First: 16001, Last: 16383}}, Events: 30, Share: 0.3},
		{Node: "b", FirstSlot: 100, LastSlot: 16000, Events: 70, Share: 0.7},
	}, s.Nodes)
	require.Nil(t, s.HotSlots, "hot_slots 0 lists none")

	s = schemas.Skew{}
	slotSkew(&s, slots, &nodeLayout{}, 2)
	require.Nil(t, s.Nodes, "no node view without a layout")
	require.Len(t, s.HotSlots, 2)
}

func TestKeySkew(t *testing.T) {
	top := make([]schemas.KeyCount, 12)
	for i := range top {
		top[i].Count = uint64(12 - i) // 12, 11, …, 1: the first ten sum to 75
	}
	var s schemas.Skew
	keySkew(&s, top, 100)
	require.InDelta(t, 0.12, s.Top1Share, 1e-12)
	require.InDelta(t, 0.75, s.Top10Share, 1e-12)
	s = schemas.Skew{}
	keySkew(&s, top, 50)
	require.Equal(t, 1.0, s.Top10Share, "upper bounds may add up beyond the events; the share stops at 1")
	s = schemas.Skew{}
	keySkew(&s, nil, 0)
	require.Zero(t, s.Top1Share)
}

func TestBusiestSlots(t *testing.T) {
	slots := []schemas.SlotCount{{Slot: 1, Events: 5}, {Slot: 2, Events: 9}, {Slot: 3, Events: 5}, {Slot: 4, Events: 1}, {Slot: 5, Events: 9}}
	require.Equal(t, []schemas.SlotCount{{Slot: 2, Events: 9}, {Slot: 5, Events: 9}, {Slot: 1, Events: 5}}, busiestSlots(slots, 3),
		"busiest first, ties by slot")
	require.Equal(t, []schemas.SlotCount{{Slot: 2, Events: 9}, {Slot: 5, Events: 9}, {Slot: 1, Events: 5}, {Slot: 3, Events: 5}, {Slot: 4, Events: 1}},
		busiestSlots(slots, 10), "fewer slots than asked: all of them")
	require.Equal(t, []schemas.SlotCount{{Slot: 2, Events: 9}}, busiestSlots(slots, 1))
}
