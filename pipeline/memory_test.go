package pipeline

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/keyheat/keyheat/schemas"
	"github.com/stretchr/testify/require"
)

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestMemoryBoundedByConfig streams well over a million distinct keys (and
// a few hot ones) through a partition: its heap stops growing once its
// structures have filled, stays under Options.MemoryBound, and the rings
// stay under their caps.
func TestMemoryBoundedByConfig(t *testing.T) {
	distinct := 1_500_000
	if testing.Short() || raceEnabled {
		distinct = 300_000
	}
	o := DefaultOptions()
	bound := o.MemoryBound()
	t.Logf("MemoryBound(defaults) = %.1f MiB", float64(bound)/(1<<20))

	base := heapInUse()
	p := newPart(t, o, testSource, Start{})
	var out Output
	e := schemas.AccessEvent{App: "shop", Op: "GET", Bytes: 100}
	var off int64
	apps := make([]string, o.MaxApps+4)
	for i := range apps {
		apps[i] = "app-" + strconv.Itoa(i)
	}
	feed := func(n int) {
		for range n {
			i := off
			e.TimeMs = t0Ms + i/50           // 50k events/s
			e.App = apps[i%int64(len(apps))] // more apps than MaxApps
			switch {
			case i%4 == 0:
				e.Key = "hot:" + strconv.FormatInt(i%8, 10) // a few hot keys
			case i%4 == 1:
				e.Key = "warm:" + strconv.FormatInt(i%5000, 10)
			default:
				e.Key = "once:" + strconv.FormatInt(i, 10) // never seen again
			}
			p.Process(&e, off, &out)
			off++
			for _, w := range out.Windows {
				p.Acked(w.StartMs)
			}
			for _, h := range out.HotKeys {
				p.AckedHotKey(h.ID)
			}
			out.Reset()
		}
	}
	const fill = 250_000 // 5 s of events: every structure has filled
	feed(fill)
	early := heapInUse() - base
	feed(distinct)
	late := heapInUse() - base
	t.Logf("heap after %d events: %.1f MiB; after %d: %.1f MiB", fill, float64(early)/(1<<20), fill+distinct, float64(late)/(1<<20))
	require.Less(t, late, bound, "heap under MemoryBound")
	require.Less(t, late-early, int64(4<<20), "the heap does not grow with distinct keys")
	for _, g := range p.det.groups {
		require.LessOrEqual(t, g.ring.Len(), 2*o.Detect.RingNodes)
	}
	require.NotZero(t, p.Stats().Hot)
	runtime.KeepAlive(p)
}
