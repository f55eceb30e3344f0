package hotring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// slotMs is the window slot most tests use; slot is the same as an option.
const (
	slotMs = 250
	slot   = slotMs * time.Millisecond
)

// t0Ms is an arbitrary slot- and rotation-aligned origin for event times,
// in Unix milliseconds like every time the ring takes.
var t0Ms = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()

func newRing(t testing.TB, o Options) *Ring {
	t.Helper()
	r, err := New(o)
	require.NoError(t, err)
	return r
}

// modelTop ranks a model the way TopN promises: count desc, key asc, zero
// counts left out.
func modelTop(m map[string]uint64, n int) []KeyCount {
	var out []KeyCount
	for k, c := range m {
		if c > 0 {
			out = append(out, KeyCount{k, c})
		}
	}
	sortDesc(out)
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

func modelAbove(m map[string]uint64, th uint64) []KeyCount {
	var out []KeyCount
	for k, c := range m {
		if c >= th {
			out = append(out, KeyCount{k, c})
		}
	}
	sortDesc(out)
	return out
}

// checkInvariants verifies the list structure of every generation: nodes
// in the right bucket, live nodes in strictly ascending (hash, key) order
// (so no key has two live nodes), no marker reachable except behind a
// node being unlinked, and the live node count matches.
func checkInvariants(t testing.TB, r *Ring) {
	t.Helper()
	for gi, tb := range r.tables() {
		if tb == nil {
			continue
		}
		live := 0
		for i := range tb.buckets {
			var prev *node
			for n := tb.buckets[i].Load(); n != nil; n = n.succ() {
				require.False(t, n.marker, "gen %d bucket %d: marker reached as a node", gi, i)
				require.Equal(t, uint64(i), n.hash&tb.mask, "node %q in wrong bucket", n.key)
				if n.dead() {
					continue
				}
				live++
				if prev != nil {
					require.True(t, less(prev.hash, prev.key, n.hash, n.key),
						"gen %d bucket %d: %q not after %q", gi, i, n.key, prev.key)
				}
				prev = n
			}
		}
		require.Equal(t, int64(live), tb.nodes.Load(), "gen %d live node count", gi)
	}
}

func short() bool { return testing.Short() || raceEnabled }
