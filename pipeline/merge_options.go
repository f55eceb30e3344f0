package pipeline

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Limits of the merger's options.
const (
	// MaxMergeTopN bounds top_n: every ranking of a report is cut to it.
	MaxMergeTopN = 10_000
	// MaxMergePartitions bounds the partitions of one topic the merger
	// expects, so a corrupt summary cannot make it wait for billions.
	MaxMergePartitions = 1 << 16
	// MaxSplit bounds a split suggestion: more physical keys than hash
	// slots cannot spread a key further.
	MaxSplit = RedisSlots
)

// MergerOptions are the merger's settings a config file sets, by their
// mapstructure tags. DefaultMergerOptions fills them; NewMerger validates
// them as they are (a zero TopN is an error, not a default).
type MergerOptions struct {
	// TopN is how many keys each ranking of a report lists (Top, TopBytes,
	// TopReads, TopWrites, TopLatency).
	TopN int `mapstructure:"top_n"`
	// MaxApps is how many apps get a report of their own in a window, the
	// heaviest by events (ties by name); the others are folded into one
	// report for schemas.OtherApp.
	MaxApps int `mapstructure:"max_apps"`
	// MaxPendingWindows bounds the windows held waiting for summaries (a
	// window no partition had an event in is never held), and so the
	// merger's memory. Past it the oldest is reported at once, as Partial
	// if partitions are missing, and the missing partitions' summaries of
	// it are dropped when they come. The detect instances keep every
	// partition within AlignWindows of the others so that they do not
	// make it reach the cap.
	MaxPendingWindows int `mapstructure:"max_pending_windows"`
	// HotSlots is how many of the busiest Redis Cluster slots a report
	// lists.
	HotSlots int `mapstructure:"hot_slots"`
	// RedisCluster maps hash slots to nodes for the report's node view.
	RedisCluster RedisClusterOptions `mapstructure:"redis_cluster"`
}

// DefaultMergerOptions: the top 100 keys, 100 apps with reports of their
// own, 32 pending windows, 10 hot slots, no Redis Cluster node view.
func DefaultMergerOptions() MergerOptions {
	return MergerOptions{
		TopN:              100,
		MaxApps:           100,
		MaxPendingWindows: 32,
		HotSlots:          10,
	}
}

// AlignWindows is how many report windows a partition's clock may run
// ahead of the slowest other partition, of any detect instance, before
// it waits: half of MaxPendingWindows, at least 1. The merger then holds
// windows with events over a span of about AlignWindows + Lateness/Window
// + 2 windows, below its cap as long as Lateness is less than
// MaxPendingWindows/2 − 2 windows; the other half is the margin for
// lateness, for summaries on their way, and for a partition that jumps
// over a gap in event time (its one event past the gap holds one more
// window).
func (o MergerOptions) AlignWindows() int64 { return max(1, int64(o.MaxPendingWindows)/2) }

// Validate returns every unusable option, joined; each names its option.
func (o MergerOptions) Validate() error {
	var errs []error
	bad := func(option, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", option, fmt.Sprintf(format, args...)))
	}
	if o.TopN < 1 || o.TopN > MaxMergeTopN {
		bad("top_n", "%d, want 1..%d, e.g. 100", o.TopN, MaxMergeTopN)
	}
	if o.MaxApps < 1 {
		bad("max_apps", "%d, want at least 1, e.g. 100", o.MaxApps)
	}
	if o.MaxPendingWindows < 1 {
		bad("max_pending_windows", "%d, want at least 1, e.g. 32", o.MaxPendingWindows)
	}
	if o.HotSlots < 0 || o.HotSlots > RedisSlots {
		bad("hot_slots", "%d, want 0..%d, e.g. 10", o.HotSlots, RedisSlots)
	}
	if _, err := o.RedisCluster.layout(); err != nil {
		errs = append(errs, fmt.Errorf("redis_cluster.%w", err))
	}
	return errors.Join(errs...)
}

// RedisClusterOptions say which node serves which hash slots, in one of
// three ways; at most one may be set. All empty means no node view (the
// report still lists its hottest slots).
type RedisClusterOptions struct {
	// Nodes names the nodes; the slots are split into len(Nodes) equal
	// ranges in order, as redis-cli --cluster create assigns them.
	Nodes []string `mapstructure:"nodes"`
	// Shards splits the slots into this many equal ranges named shard-0,
	// shard-1, …
	Shards int `mapstructure:"shards"`
	// Ranges gives every node's ranges explicitly (CLUSTER SHARDS shows
	// them); a node may appear in several. They must cover every slot
	// 0..16383 exactly once.
	Ranges []NodeSlots `mapstructure:"ranges"`
}

// NodeSlots is one range of slots, First to Last inclusive, served by Node.
type NodeSlots struct {
	Node  string `mapstructure:"node"`
	First int    `mapstructure:"first"`
	Last  int    `mapstructure:"last"`
}

// nodeLayout is a validated slot map: node names in the order of their
// lowest slot, each node's ranges, and the node of every slot.
type nodeLayout struct {
	names  []string
	ranges [][]NodeSlots
	node   []uint16 // slot → index into names; nil without a node view
}

// layout validates o and builds its slot map.
func (o RedisClusterOptions) layout() (*nodeLayout, error) {
	set := 0
	for _, b := range []bool{len(o.Nodes) > 0, o.Shards != 0, len(o.Ranges) > 0} {
		if b {
			set++
		}
	}
	if set > 1 {
		return nil, errors.New("nodes, shards and ranges: set one of them, not several")
	}
	var ranges []NodeSlots
	switch {
	case len(o.Nodes) > 0:
		seen := map[string]bool{}
		for _, n := range o.Nodes {
			if n == "" {
				return nil, errors.New("nodes: a node name is empty")
			}
			if seen[n] {
				return nil, fmt.Errorf("nodes: %q is named twice", n)
			}
			seen[n] = true
		}
		if len(o.Nodes) > RedisSlots {
			return nil, fmt.Errorf("nodes: %d nodes, a cluster has at most %d", len(o.Nodes), RedisSlots)
		}
		ranges = equalSlotRanges(o.Nodes)
	case o.Shards != 0:
		if o.Shards < 1 || o.Shards > RedisSlots {
			return nil, fmt.Errorf("shards: %d, want 1..%d", o.Shards, RedisSlots)
		}
		names := make([]string, o.Shards)
		for i := range names {
			names[i] = "shard-" + strconv.Itoa(i)
		}
		ranges = equalSlotRanges(names)
	case len(o.Ranges) > 0:
		ranges = slices.Clone(o.Ranges)
		for _, r := range ranges {
			if r.Node == "" {
				return nil, fmt.Errorf("ranges: the range %d-%d names no node", r.First, r.Last)
			}
			if r.First < 0 || r.Last >= RedisSlots || r.First > r.Last {
				return nil, fmt.Errorf("ranges: %s %d-%d, want 0 ≤ first ≤ last ≤ %d", r.Node, r.First, r.Last, RedisSlots-1)
			}
		}
		slices.SortFunc(ranges, func(a, b NodeSlots) int { return a.First - b.First })
		next := 0
		for _, r := range ranges {
			if r.First < next {
				return nil, fmt.Errorf("ranges: %s %d-%d overlaps another range", r.Node, r.First, r.Last)
			}
			if r.First > next {
				return nil, fmt.Errorf("ranges: slots %d-%d belong to no node; cover 0-%d", next, r.First-1, RedisSlots-1)
			}
			next = r.Last + 1
		}
		if next < RedisSlots {
			return nil, fmt.Errorf("ranges: slots %d-%d belong to no node; cover 0-%d", next, RedisSlots-1, RedisSlots-1)
		}
	default:
		return &nodeLayout{}, nil
	}
	l := &nodeLayout{node: make([]uint16, RedisSlots)}
	index := map[string]int{}
	for _, r := range ranges { // sorted by First, so names come in slot order
		i, ok := index[r.Node]
		if !ok {
			i = len(l.names)
			index[r.Node] = i
			l.names = append(l.names, r.Node)
			l.ranges = append(l.ranges, nil)
		}
		l.ranges[i] = append(l.ranges[i], r)
		for s := r.First; s <= r.Last; s++ {
			l.node[s] = uint16(i)
		}
	}
	return l, nil
}

// equalSlotRanges splits the slots over names the way redis-cli --cluster
// create does (clusterManagerCommandCreate in redis-cli.c): each node
// starts where the previous ended, its last slot rounded from a float32
// cursor, the last node taking the rest. Three nodes get 0-5460,
// 5461-10922 and 10923-16383.
func equalSlotRanges(names []string) []NodeSlots {
	perNode := float32(RedisSlots) / float32(len(names))
	out := make([]NodeSlots, 0, len(names))
	first := 0
	var cursor float32
	for i, n := range names {
		// The float32 sum, then C's lround on its double: math.Round also
		// rounds halves away from zero.
		last := int(math.Round(float64(cursor + perNode - 1)))
		if last > RedisSlots || i == len(names)-1 {
			last = RedisSlots - 1
		}
		last = max(last, first)
		out = append(out, NodeSlots{Node: n, First: first, Last: last})
		first = last + 1
		cursor += perNode
	}
	return out
}
