package redisslot

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
	require.Equal(t, uint16(0x31C3), CRC16(0, "123456789"))
	require.Equal(t, uint16(0), CRC16(0, ""))
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		b := make([]byte, n)
		for range 50 {
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			require.Equal(t, crc16Bitwise(string(b)), CRC16(0, string(b)), "%x", b)
			// The CRC of a+b continues from the CRC of a.
			cut := rng.IntN(n + 1)
			require.Equal(t, crc16Bitwise(string(b)), CRC16(CRC16(0, string(b[:cut])), string(b[cut:])))
		}
	}
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want uint16
	}{
		// CLUSTER KEYSLOT answers from a Redis server.
		{"foo", 12182},
		{"bar", 5061},
		{"hello", 866},
		{"123456789", 0x31C3 % Slots},
		// Hash tags (Redis Cluster specification, "Hash tags").
		{"{user1000}.following", Of("user1000")},
		{"{user1000}.followers", Of("user1000")},
		{"foo{}{bar}", CRC16(0, "foo{}{bar}") % Slots}, // empty first tag: whole key
		{"foo{{bar}}zap", Of("{bar")},                  // tag starts after the first {
		{"foo{bar}{zap}", Of("bar")},                   // only the first tag counts
		{"{", CRC16(0, "{") % Slots},
		{"}{", CRC16(0, "}{") % Slots},
		{"{}", CRC16(0, "{}") % Slots},
		{"a{}{b}", CRC16(0, "a{}{b}") % Slots},
		{"{a", CRC16(0, "{a") % Slots}, // no closing brace
		{"x{a}", Of("a")},
		{"", 0},
	} {
		require.Equal(t, tc.want, Of(tc.key), "Of(%q)", tc.key)
	}
	require.NotEqual(t, Of("a{}{b}"), Of("b"), "an empty tag does not fall through to the next one")
}

func BenchmarkOf(b *testing.B) {
	keys := []string{"tenant-7:user:123456", "{user1000}.following", "product:42"}
	b.ReportAllocs()
	var s uint16
	i := 0
	for b.Loop() {
		s += Of(keys[i%len(keys)])
		i++
	}
	_ = s
}

// TestOfVectors: Redis Cluster slots computed outside keyheat (CRC16
// XMODEM as Python's binascii.crc_hqx(key, 0) gives it, mod 16384, after
// the hash-tag rule of the Redis Cluster specification: the bytes between
// the first "{" and the first "}" after it, when not empty), so a
// hash-tag rule and a CRC that agree with each other but not with Redis
// fail here.
func TestOfVectors(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want uint16
	}{
		{"123456789", 12739}, // CRC16 check value 0x31C3
		{"foo", 12182},
		{"bar", 5061},
		{"hello", 866},
		{"user1000", 3443},
		{"tenant-7:user:123456", 4130},
		// Hash tags.
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{bar}{zap}", 5061},  // only the first tag: "bar"
		{"foo{{bar}}zap", 4015},  // tag "{bar"
		{"foo{}{bar}", 8363},     // empty first tag: the whole key
		{"{}", 15257},            // empty tag: the whole key
		{"{", 4092},              // no closing brace: the whole key
		{"}", 12090},             // no opening brace
		{"}{", 12793},            // "}" before "{": the whole key
		{"a{}{b}", 15033},        // empty first tag: the whole key, not "b"
		{"{}{b}", 8193},          // likewise
		{"{a", 10276},            // unclosed
		{"x{a}", 15495},          // tag "a"
		{"a{b}c", 3300},          // tag "b"
		{"{{}}", 4092},           // tag "{"
		{"\u00fc{\u00fc}", 9552}, // bytes, not runes: tag "ü" hashed as UTF-8
	} {
		require.Equal(t, tc.want, Of(tc.key), "Of(%q)", tc.key)
	}
}
