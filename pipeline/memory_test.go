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
// stay under their caps. With keys of MaxKeyBytes (the longest ingest
// accepts by default) the bound still holds.
func TestMemoryBoundedByConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pad      int // bytes every key is padded to, 0 for none
		fill     int // events until every structure has filled
		distinct int
	}{
		{"short keys", 0, 250_000, 1_500_000},
		// Trackers fill with long keys later: each app's top-K takes new
		// keys only past the exact table's 4,096 keys of 1 KiB.
		{"keys of max_key_bytes", DefaultOptions().MaxKeyBytes, 500_000, 400_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			distinct, fill, steady := tc.distinct, tc.fill, true
			if testing.Short() || raceEnabled {
				// A fifth of the keys; with long keys a fifth of the fill
				// too, which leaves the trackers short of their steady
				// state: the bound is checked, the growth is not (the
				// suite's run without -race checks both).
				distinct /= 5
				if tc.pad > 0 {
					fill, steady = fill/5, false
				}
			}
			memoryBounded(t, tc.pad, fill, distinct, steady)
		})
	}
}

func memoryBounded(t *testing.T, pad, fill, distinct int, steady bool) {
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
	buf := make([]byte, 0, max(pad, 64))
	key := func(prefix string, n int64) string {
		buf = strconv.AppendInt(append(buf[:0], prefix...), n, 10)
		for len(buf) < pad {
			buf = append(buf, '.')
		}
		return string(buf)
	}
	feed := func(n int) {
		for range n {
			i := off
			e.TimeMs = t0Ms + i/50           // 50k events/s
			e.App = apps[i%int64(len(apps))] // more apps than MaxApps
			switch {
			case i%4 == 0:
				e.Key = key("hot:", i%8) // a few hot keys
			case i%4 == 1:
				e.Key = key("warm:", i%5000)
			default:
				e.Key = key("once:", i) // never seen again
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
	feed(fill)
	early := heapInUse() - base
	feed(distinct)
	late := heapInUse() - base
	t.Logf("heap after %d events: %.1f MiB; after %d: %.1f MiB", fill, float64(early)/(1<<20), fill+distinct, float64(late)/(1<<20))
	require.Less(t, late, bound, "heap under MemoryBound")
	if steady {
		require.Less(t, late-early, int64(4<<20), "the heap does not grow with distinct keys")
	}
	for _, g := range p.det.groups {
		require.LessOrEqual(t, g.ring.Len(), 2*o.Detect.RingNodes)
	}
	require.NotZero(t, p.Stats().Hot)
	require.Zero(t, p.Stats().TruncatedKeys, "keys of max_key_bytes are kept whole")
	runtime.KeepAlive(p)
}
