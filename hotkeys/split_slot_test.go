package hotkeys

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSplitSlot: Slot is internal/redisslot's, which tests the CRC and
// the hash-tag rule; here, that the wrapper hands back CLUSTER KEYSLOT's
// answers (TestSplitClusterSlots asks a server for random keys).
func TestSplitSlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int
	}{
		{"foo", 12182},
		{"hello", 866},
		{"123456789", 12739},
		{"", 0},
		{"{user1000}.following", 3443},
		{"foo{}{bar}", 8363}, // empty first tag: the whole key
	} {
		require.Equal(t, tc.want, Slot(tc.key), "Slot(%q)", tc.key)
	}
	require.Equal(t, uint16(12739), splitCRC16(splitCRC16(0, "1234"), "56789")%splitSlots, "a CRC continues from a prefix's")
}

func BenchmarkSplitSlot(b *testing.B) {
	keys := []string{"tenant-7:user:123456", "{user1000}.following", "product:42"}
	b.ReportAllocs()
	s, i := 0, 0
	for b.Loop() {
		s += Slot(keys[i%len(keys)])
		i++
	}
	_ = s
}
