package hotkeys

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// splitCRC16Bitwise is the Redis Cluster specification's reference CRC16, one
// bit at a time, to check the table-driven one against.
func splitCRC16Bitwise(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func TestSplitSlot(t *testing.T) {
	// The specification's check value: CRC16("123456789") = 0x31C3.
	require.Equal(t, uint16(0x31C3), splitCRC16(0, "123456789"))
	for _, tc := range []struct {
		key  string
		want int
	}{
		// CLUSTER KEYSLOT answers of Redis 7.0 (TestSplitClusterSlots
		// asks a server for random keys).
		{"foo", 12182},
		{"bar", 5061},
		{"hello", 866},
		{"123456789", 0x31C3 % splitSlots},
		{"", 0},
		// Hash tags.
		{"{user1000}.following", Slot("user1000")},
		{"{user1000}.followers", Slot("user1000")},
		{"foo{}{bar}", int(splitCRC16Bitwise("foo{}{bar}") % splitSlots)}, // empty first tag: whole key
		{"foo{{bar}}zap", Slot("{bar")},                                   // the tag starts after the first {
		{"foo{bar}{zap}", Slot("bar")},                                    // only the first tag counts
		{"{a", int(splitCRC16Bitwise("{a") % splitSlots)},                 // no closing brace
		{"}{", int(splitCRC16Bitwise("}{") % splitSlots)},
		{"x{a}", Slot("a")},
	} {
		require.Equal(t, tc.want, Slot(tc.key), "Slot(%q)", tc.key)
	}
	require.Equal(t, Slot("{user1000}.following"), Slot("{user1000}.followers"))
	require.NotEqual(t, Slot("foo{}{bar}"), Slot("bar"), "an empty tag does not fall through to the next one")
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
