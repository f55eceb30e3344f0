package pipeline

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMergerOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*MergerOptions)
		want   []string // substrings of the error, in order; none: valid
	}{
		{"defaults", func(*MergerOptions) {}, nil},
		{"top_n zero", func(o *MergerOptions) { o.TopN = 0 }, []string{"top_n: 0"}},
		{"top_n too large", func(o *MergerOptions) { o.TopN = MaxMergeTopN + 1 }, []string{"top_n: 10001"}},
		{"max_apps zero", func(o *MergerOptions) { o.MaxApps = 0 }, []string{"max_apps: 0"}},
		{"max_pending_windows zero", func(o *MergerOptions) { o.MaxPendingWindows = 0 }, []string{"max_pending_windows: 0"}},
		{"hot_slots negative", func(o *MergerOptions) { o.HotSlots = -1 }, []string{"hot_slots: -1"}},
		{"hot_slots zero is fine", func(o *MergerOptions) { o.HotSlots = 0 }, nil},
		{"nodes", func(o *MergerOptions) { o.RedisCluster.Nodes = []string{"a", "b"} }, nil},
		{"nodes and shards", func(o *MergerOptions) {
			o.RedisCluster.Nodes = []string{"a"}
			o.RedisCluster.Shards = 3
		}, []string{"redis_cluster.nodes, shards and ranges: set one"}},
		{"node named twice", func(o *MergerOptions) { o.RedisCluster.Nodes = []string{"a", "a"} }, []string{`redis_cluster.nodes: "a" is named twice`}},
		{"node without name", func(o *MergerOptions) { o.RedisCluster.Nodes = []string{"a", ""} }, []string{"redis_cluster.nodes: a node name is empty"}},
		{"shards", func(o *MergerOptions) { o.RedisCluster.Shards = 3 }, nil},
		{"shards negative", func(o *MergerOptions) { o.RedisCluster.Shards = -1 }, []string{"redis_cluster.shards: -1"}},
		{"shards too many", func(o *MergerOptions) { o.RedisCluster.Shards = RedisSlots + 1 }, []string{"redis_cluster.shards: 16385"}},
		{"ranges", func(o *MergerOptions) {
			o.RedisCluster.Ranges = []NodeSlots{{"b", 8192, 16383}, {"a", 0, 99}, {"a", 100, 8191}}
		}, nil},
		{"range gap", func(o *MergerOptions) {
			o.RedisCluster.Ranges = []NodeSlots{{"a", 0, 99}, {"b", 200, 16383}}
		}, []string{"redis_cluster.ranges: slots 100-199 belong to no node"}},
		{"range short", func(o *MergerOptions) {
			o.RedisCluster.Ranges = []NodeSlots{{"a", 0, 16000}}
		}, []string{"redis_cluster.ranges: slots 16001-16383 belong to no node"}},
		{"range overlap", func(o *MergerOptions) {
			o.RedisCluster.Ranges = []NodeSlots{{"a", 0, 9000}, {"b", 8000, 16383}}
		}, []string{"redis_cluster.ranges: b 8000-16383 overlaps"}},
		{"range reversed", func(o *MergerOptions) {
			o.RedisCluster.Ranges = []NodeSlots{{"a", 10, 0}}
		}, []string{"redis_cluster.ranges: a 10-0"}},
		{"range beyond the slots", func(o *MergerOptions) {
			o.RedisCluster.Ranges = []NodeSlots{{"a", 0, RedisSlots}}
		}, []string{"redis_cluster.ranges: a 0-16384"}},
		{"range without node", func(o *MergerOptions) {
			o.RedisCluster.Ranges = []NodeSlots{{"", 0, 16383}}
		}, []string{"redis_cluster.ranges: the range 0-16383 names no node"}},
		{"every problem at once", func(o *MergerOptions) {
			o.TopN, o.MaxApps, o.MaxPendingWindows = 0, 0, 0
		}, []string{"top_n", "max_apps", "max_pending_windows"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultMergerOptions()
			tc.change(&o)
			err := o.Validate()
			if len(tc.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			msg := err.Error()
			for _, w := range tc.want {
				require.Contains(t, msg, w)
			}
			_, err = NewMerger(MergerConfig{MergerOptions: o, Window: time.Second})
			require.ErrorContains(t, err, tc.want[0], "NewMerger refuses what Validate refuses")
		})
	}
}

func TestNewMergerRefusesBadWindow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		window   time.Duration
		lateness time.Duration
		want     string
	}{
		{"zero window", 0, 0, "window 0s"},
		{"sub-millisecond window", 1500 * time.Microsecond, 0, "window 1.5ms"},
		{"negative lateness", time.Second, -time.Second, "lateness -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMerger(MergerConfig{MergerOptions: DefaultMergerOptions(), Window: tc.window, Lateness: tc.lateness})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestEqualSlotRanges(t *testing.T) {
	// redis-cli --cluster create with three masters assigns these ranges.
	require.Equal(t, []NodeSlots{{"a", 0, 5460}, {"b", 5461, 10922}, {"c", 10923, 16383}},
		equalSlotRanges([]string{"a", "b", "c"}))
	require.Equal(t, []NodeSlots{{"a", 0, 16383}}, equalSlotRanges([]string{"a"}))
	require.Equal(t, []NodeSlots{{"a", 0, 8191}, {"b", 8192, 16383}}, equalSlotRanges([]string{"a", "b"}))
	for _, n := range []int{1, 2, 3, 5, 6, 7, 10, 100, 999, 1000, 16383, 16384} {
		names := make([]string, n)
		for i := range names {
			names[i] = string(rune('a' + i%26))
		}
		rs := equalSlotRanges(names)
		require.Len(t, rs, n)
		next := 0
		for i, r := range rs {
			require.Equal(t, next, r.First, "n=%d range %d starts where the previous ended", n, i)
			require.LessOrEqual(t, r.First, r.Last, "n=%d range %d is not empty", n, i)
			size := r.Last - r.First + 1
			require.InDelta(t, float64(RedisSlots)/float64(n), float64(size), 1.5, "n=%d range %d is about equal", n, i)
			next = r.Last + 1
		}
		require.Equal(t, RedisSlots, next, "n=%d ranges cover every slot", n)
	}
}

func TestNodeLayout(t *testing.T) {
	l, err := RedisClusterOptions{Ranges: []NodeSlots{{"b", 100, 8191}, {"a", 0, 99}, {"b", 8192, 9000}, {"a", 9001, 16383}}}.layout()
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, l.names, "nodes in the order of their lowest slot")
	require.Equal(t, [][]NodeSlots{{{"a", 0, 99}, {"a", 9001, 16383}}, {{"b", 100, 8191}, {"b", 8192, 9000}}}, l.ranges)
	for slot, want := range map[int]uint16{0: 0, 99: 0, 100: 1, 9000: 1, 9001: 0, 16383: 0} {
		require.Equal(t, want, l.node[slot], "slot %d", slot)
	}
	l, err = RedisClusterOptions{Shards: 4}.layout()
	require.NoError(t, err)
	require.Equal(t, []string{"shard-0", "shard-1", "shard-2", "shard-3"}, l.names)
	l, err = RedisClusterOptions{}.layout()
	require.NoError(t, err)
	require.Empty(t, l.names, "no node view by default")
}

func TestNewMergerSplitCapacity(t *testing.T) {
	for _, c := range []float64{-1, math.Inf(1), math.NaN()} {
		_, err := NewMerger(MergerConfig{MergerOptions: DefaultMergerOptions(), Window: time.Second, SplitCapacity: c})
		require.ErrorContains(t, err, "split capacity", "capacity %v", c)
	}
	m, err := NewMerger(MergerConfig{MergerOptions: DefaultMergerOptions(), Window: time.Second})
	require.NoError(t, err)
	require.Equal(t, DefaultOptions().Detect.SplitCapacity, m.cfg.SplitCapacity, "0 takes the detect default")
}

func TestAlignWindows(t *testing.T) {
	for _, tt := range []struct {
		pending int
		want    int64
	}{{32, 16}, {33, 16}, {4, 2}, {2, 1}, {1, 1}} {
		o := DefaultMergerOptions()
		o.MaxPendingWindows = tt.pending
		require.Equal(t, tt.want, o.AlignWindows(), "max_pending_windows %d", tt.pending)
	}
}
