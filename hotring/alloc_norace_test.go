//go:build !race

// Allocation counts are only meaningful without the race detector, which
// allocates on its own; make test runs the suite once without -race too.

package hotring

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNoAllocOnExistingKey(t *testing.T) {
	r := newRing(t, Options{WindowSlots: 8, WindowSlotDuration: slot})
	buf := []byte("existing")
	r.TouchAt("existing", t0)
	require.Zero(t, testing.AllocsPerRun(100, func() { r.TouchAt("existing", t0) }))
	require.Zero(t, testing.AllocsPerRun(100, func() { r.TouchBytesAt(buf, 1, t0) }))
	require.Zero(t, testing.AllocsPerRun(100, func() { r.FrequencyAt("existing", t0) }))
	require.Zero(t, testing.AllocsPerRun(100, func() { r.TouchAndClampAt("existing", 1e9, t0) }))
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = keyName(i)
	}
	i := 0
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { r.TouchAt(keys[i], t0); i++ }),
		"an insert allocates the node and nothing else")
}
