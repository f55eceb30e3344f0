package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// TestUnkeyMarksOpenAndLaterWindows: a partition built keyed and unkeyed
// in its second window says Keyed false from that window on, never
// before; the apps it had counted in that window carry no sketch (it
// would miss their first events), the apps counted after carry one.
func TestUnkeyMarksOpenAndLaterWindows(t *testing.T) {
	o := DefaultOptions()
	o.Window, o.Lateness = time.Second, 0
	p := newPart(t, o, testSource, Start{Offset: 0})
	var out Output
	off := int64(0)
	add := func(app, key string, tsMs int64) {
		e := schemas.AccessEvent{TimeMs: tsMs, App: app, Key: key, Op: "GET"}
		p.Process(&e, off, &out)
		off++
	}
	add("a", "x", t0Ms)
	add("a", "x", t0Ms+1000) // emits window 0
	p.Unkey()
	add("a", "y", t0Ms+1001)
	add("b", "z", t0Ms+1002)
	// Later windows take their apps from the pool, which holds those
	// allocated while keyed.
	for w := int64(2); w < 6; w++ {
		for _, app := range []string{"a", "b", "c"} {
			add(app, "x", t0Ms+w*1000)
		}
	}
	p.End(&out)

	require.Len(t, out.Windows, 6)
	sketches := func(w schemas.PartitionWindow) map[string]bool {
		m := map[string]bool{}
		for _, a := range w.Apps {
			m[a.App] = len(a.Sketch) > 0
		}
		return m
	}
	w0, w1 := out.Windows[0], out.Windows[1]
	require.True(t, w0.Keyed, "window 0 was emitted before Unkey")
	require.Equal(t, map[string]bool{"a": false}, sketches(w0))
	require.False(t, w1.Keyed, "window 1 was open at Unkey")
	require.Equal(t, map[string]bool{"a": false, "b": true}, sketches(w1), "a was counted before Unkey, b after")
	for _, w := range out.Windows[2:] {
		require.False(t, w.Keyed)
		require.Equal(t, map[string]bool{"a": true, "b": true, "c": true}, sketches(w), "window %d", w.StartMs-t0Ms)
	}
}
