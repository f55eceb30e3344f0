//go:build !race

// Allocation counts are only meaningful without the race detector, which
// allocates on its own; make test runs the suite once without -race too.

package hotring

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNoAllocOnExistingKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"window", Options{WindowSlots: 8, WindowSlotDuration: slot}},
		{"defaults", DefaultOptions()}, // rotation and sweeps scheduled too
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(t, tc.o)
			r.Touch("existing", t0Ms)
			require.Zero(t, testing.AllocsPerRun(100, func() { r.Touch("existing", t0Ms) }))
			require.Zero(t, testing.AllocsPerRun(100, func() { r.TouchN("existing", 3, t0Ms) }))
			require.Zero(t, testing.AllocsPerRun(100, func() { r.Frequency("existing", t0Ms) }))
			require.Zero(t, testing.AllocsPerRun(100, func() { r.TouchAndClamp("existing", 1e9, t0Ms) }))
			keys := make([]string, 200)
			for i := range keys {
				keys[i] = keyName(i)
			}
			i := 0
			require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { r.Touch(keys[i], t0Ms); i++ }),
				"an insert allocates the node and nothing else")
		})
	}
}

func TestNoAllocOnHashedTouch(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 11, WindowSlotDuration: slot, Lanes: 5})
	var win Window
	w := Weights{1, 1, 100, 1}
	require.True(t, r.InsertHash(7, "4:shop", "existing", []Weights{w}, t0Ms, &win))
	require.Zero(t, testing.AllocsPerRun(100, func() { r.TouchHash(7, "4:shop", "existing", &w, t0Ms, t0Ms, &win) }))
	require.Zero(t, testing.AllocsPerRun(100, func() { r.WindowHash(7, "4:shop", "existing", t0Ms, &win) }))
	require.Zero(t, testing.AllocsPerRun(100, func() { r.TouchHash(8, "4:shop", "absent", &w, t0Ms, t0Ms, &win) }))
	i := uint64(100)
	require.Equal(t, 2.0, testing.AllocsPerRun(100, func() {
		r.InsertHash(i, "4:shop", "new", []Weights{w}, t0Ms, &win)
		i++
	}), "an insert allocates the node and its ns+key")
}
