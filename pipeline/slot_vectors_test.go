package pipeline_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/pipeline"
)

// TestSlotVectors: Redis Cluster slots computed outside keyheat (CRC16
// XMODEM as Python's binascii.crc_hqx(key, 0) gives it, mod 16384, after
// the hash-tag rule of the Redis Cluster specification: the bytes between
// the first "{" and the first "}" after it, when not empty), so a
// hash-tag rule and a CRC that agree with each other but not with Redis
// fail here.
func TestSlotVectors(t *testing.T) {
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
		require.Equal(t, tc.want, pipeline.Slot(tc.key), "Slot(%q)", tc.key)
	}
}
