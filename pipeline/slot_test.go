package pipeline

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// crc16Bitwise is the Redis Cluster specification's reference algorithm,
// one bit at a time, to check the table-driven one against.
func crc16Bitwise(s string) uint16 {
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

func TestCRC16(t *testing.T) {
	// The check value of the specification: CRC16("123456789") = 0x31C3.
	require.Equal(t, uint16(0x31C3), crc16("123456789"))
	require.Equal(t, uint16(0), crc16(""))
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		b := make([]byte, n)
		for range 50 {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			require.Equal(t, crc16Bitwise(string(b)), crc16(string(b)), "%x", b)
		}
	}
}

func TestSlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want uint16
	}{
		// CLUSTER KEYSLOT answers from a Redis server.
		{"foo", 12182},
		{"bar", 5061},
		{"hello", 866},
		{"123456789", 0x31C3 % RedisSlots},
		// Hash tags (Redis Cluster specification, "Hash tags").
		{"{user1000}.following", Slot("user1000")},
		{"{user1000}.followers", Slot("user1000")},
		{"foo{}{bar}", crc16("foo{}{bar}") % RedisSlots}, // empty first tag: whole key
		{"foo{{bar}}zap", Slot("{bar")},                  // tag starts after the first {
		{"foo{bar}{zap}", Slot("bar")},                   // only the first tag counts
		{"{", crc16("{") % RedisSlots},
		{"}{", crc16("}{") % RedisSlots},
		{"{}", crc16("{}") % RedisSlots},
		{"a{}{b}", crc16("a{}{b}") % RedisSlots},
		{"{a", crc16("{a") % RedisSlots}, // no closing brace
		{"x{a}", Slot("a")},
		{"", 0},
	} {
		require.Equal(t, tc.want, Slot(tc.key), "Slot(%q)", tc.key)
	}
	require.NotEqual(t, Slot("a{}{b}"), Slot("b"), "an empty tag does not fall through to the next one")
}

func BenchmarkSlot(b *testing.B) {
	keys := []string{"tenant-7:user:123456", "{user1000}.following", "product:42"}
	b.ReportAllocs()
	var s uint16
	i := 0
	for b.Loop() {
		s += Slot(keys[i%len(keys)])
		i++
	}
	_ = s
}
