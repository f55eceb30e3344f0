package pipeline

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// scored is a value ranked by score, largest first, then by id: scores tie
// often, and equal ids make duplicates.
type scored struct {
	score uint8
	id    int
}

type byScore struct{}

func (byScore) before(a, b *scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}

// compareScored is byScore written apart from it, for slices.SortFunc:
// the model the tests hold bestN to.
func compareScored(a, b scored) int {
	return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.id, b.id))
}

// nonNil is s, or an empty slice for nil: a list of nothing is one either
// way.
func nonNil(s []scored) []scored {
	if s == nil {
		return []scored{}
	}
	return s
}

// TestBestNMatchesSort holds bestN to a full sort of what was offered,
// for n from 0 to past the number of values, over values with many ties
// and duplicates, reusing one bestN throughout as callers do.
func TestBestNMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var b bestN[scored, byScore]
	for round := range 300 {
		m := r.IntN(40)
		vals := make([]scored, m)
		for i := range vals {
			// Few scores and ids: ties on score and whole duplicates.
			vals[i] = scored{uint8(r.IntN(5)), r.IntN(m/2 + 1)}
		}
		want := slices.SortedFunc(slices.Values(vals), compareScored)
		for _, n := range []int{0, 1, 2, m / 2, m - 1, m, m + 1, 2*m + 3} {
			if n < 0 {
				continue
			}
			b.reset(n, byScore{})
			for i, v := range vals {
				b.offer(v)
				if kept := min(i+1, n); kept < n || n == 0 {
					require.Nil(t, b.worst(), "round %d n %d: worst with room after %d offers", round, n, i+1)
				} else {
					w := b.worst()
					require.NotNil(t, w, "round %d n %d: no worst when full", round, n)
					seen := slices.SortedFunc(slices.Values(vals[:i+1]), compareScored)
					require.Equal(t, seen[n-1], *w, "round %d n %d: worst after %d offers", round, n, i+1)
				}
			}
			got := b.sorted()
			require.Equal(t, nonNil(want[:min(n, m)]), nonNil(got), "round %d n %d of %v", round, n, vals)
			require.Nil(t, b.worst(), "round %d n %d: sorted leaves b empty", round, n)

			// The same, settled against worst as the callers do.
			b.reset(n, byScore{})
			for _, v := range vals {
				switch w := b.worst(); {
				case w == nil:
					b.offer(v)
				case byScore{}.before(&v, w):
					b.replaceWorst(v)
				}
			}
			require.Equal(t, nonNil(want[:min(n, m)]), nonNil(b.sorted()), "round %d n %d with replaceWorst of %v", round, n, vals)
		}
	}
}

// TestBestNOfferOrder checks that what bestN returns does not depend on
// the order of the offers, for every order of a small set with ties.
func TestBestNOfferOrder(t *testing.T) {
	vals := []scored{{3, 1}, {3, 0}, {1, 5}, {3, 1}, {7, 2}, {1, 4}}
	want := slices.SortedFunc(slices.Values(vals), compareScored)
	var b bestN[scored, byScore]
	var permute func(k int)
	permute = func(k int) {
		if k == len(vals) {
			for n := range len(vals) + 2 {
				b.reset(n, byScore{})
				for _, v := range vals {
					b.offer(v)
				}
				require.Equal(t, nonNil(want[:min(n, len(vals))]), nonNil(b.sorted()), "n %d offers %v", n, vals)
			}
			return
		}
		for i := k; i < len(vals); i++ {
			vals[k], vals[i] = vals[i], vals[k]
			permute(k + 1)
			vals[k], vals[i] = vals[i], vals[k]
		}
	}
	permute(0)
}

// TestBestNReusesStorage checks that a bestN reset for the same n
// allocates nothing once it has held n values: a window's lists are chosen
// in the storage of the window before.
func TestBestNReusesStorage(t *testing.T) {
	vals := make([]scored, 500)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range vals {
		vals[i] = scored{uint8(r.IntN(256)), i}
	}
	var b bestN[scored, byScore]
	run := func() {
		b.reset(100, byScore{})
		for _, v := range vals {
			b.offer(v)
		}
		b.sorted()
	}
	run()
	require.Zero(t, testing.AllocsPerRun(20, run))
}
