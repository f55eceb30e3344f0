package member

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pausedIn is what cl itself has paused (PauseFetchPartitions with
// nothing to add returns it), partitions sorted.
func pausedIn(cl *kgo.Client) map[string][]int32 {
	got := cl.PauseFetchPartitions(nil)
	if len(got) == 0 {
		return map[string][]int32{}
	}
	for _, ps := range got {
		slices.Sort(ps)
	}
	return got
}

func TestPausesReasons(t *testing.T) {
	// Pausing is the client's own state: no broker is asked, so a client
	// whose seed nobody answers shows it.
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	defer cl.Close()
	a, b := TP{"events", 0}, TP{"events", 1}

	type step struct {
		name   string
		do     func(p *Pauses) bool
		want   bool // what the call reports
		client map[string][]int32
		whyA   Why
	}
	steps := []step{
		{"behind pauses", func(p *Pauses) bool { return p.Pause(cl, a, Behind) }, true, map[string][]int32{"events": {0}}, Behind},
		{"behind again changes nothing", func(p *Pauses) bool { return p.Pause(cl, a, Behind) }, false, map[string][]int32{"events": {0}}, Behind},
		{"at end adds a reason, no new pause", func(p *Pauses) bool { return p.Pause(cl, a, AtEnd) }, false, map[string][]int32{"events": {0}}, Behind | AtEnd},
		{"room again leaves it paused at its end", func(p *Pauses) bool { return p.Resume(cl, a, Behind) }, false, map[string][]int32{"events": {0}}, AtEnd},
		{"resuming a reason it has not changes nothing", func(p *Pauses) bool { return p.Resume(cl, a, Behind) }, false, map[string][]int32{"events": {0}}, AtEnd},
		{"another partition pauses alone", func(p *Pauses) bool { return p.Pause(cl, b, Behind|AtEnd) }, true, map[string][]int32{"events": {0, 1}}, AtEnd},
		{"the last reason resumes", func(p *Pauses) bool { return p.Resume(cl, a, AtEnd) }, true, map[string][]int32{"events": {1}}, 0},
		{"resuming a fetched one changes nothing", func(p *Pauses) bool { return p.Resume(cl, a, AtEnd) }, false, map[string][]int32{"events": {1}}, 0},
		{"no reason pauses nothing", func(p *Pauses) bool { return p.Pause(cl, a, 0) }, false, map[string][]int32{"events": {1}}, 0},
		{"forget resumes whatever the reasons", func(p *Pauses) bool { p.Forget(cl, b); return false }, false, map[string][]int32{}, 0},
		{"forget of a fetched one changes nothing", func(p *Pauses) bool { p.Forget(cl, b); return false }, false, map[string][]int32{}, 0},
	}
	var p Pauses
	for _, s := range steps {
		require.Equal(t, s.want, s.do(&p), s.name)
		require.Equal(t, s.client, pausedIn(cl), "%s: the client's paused partitions", s.name)
		require.Equal(t, s.whyA, p.Why(a), "%s: why %v is paused", s.name, a)
	}
	require.Zero(t, p.Why(b), "forgotten")
}
