package pipeline

import (
	"encoding/hex"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// truncMark separates a long key's kept prefix from its hash.
const truncMark = "…"

// truncSuffixLen is what truncation appends: the mark and 16 hex digits.
const truncSuffixLen = len(truncMark) + 16

// minKeyBytes is the smallest Options.MaxKeyBytes: a useful prefix plus
// the suffix.
const minKeyBytes = truncSuffixLen + 13

// truncateKey returns key if it fits in maxBytes, else its first bytes (cut
// at a UTF-8 character boundary), "…" and 16 hex digits of the xxh3 hash of
// the whole key, maxBytes bytes at most. Two long keys with the same prefix
// stay distinct unless their 64-bit hashes collide; the same long key
// always gives the same result, on every partition and every run.
func truncateKey(key string, maxBytes int) string {
	if len(key) <= maxBytes {
		return key
	}
	n := maxBytes - truncSuffixLen
	for n > 0 && !utf8.RuneStart(key[n]) {
		n--
	}
	b := make([]byte, 0, n+truncSuffixLen)
	b = append(b, key[:n]...)
	b = append(b, truncMark...)
	return string(hexHash(b, xxh3.HashString(key)))
}

// hexHash appends h as 16 lowercase hex digits, the form of
// schemas.HotKeyEvent.KeyHash.
func hexHash(dst []byte, h uint64) []byte {
	var raw [8]byte
	for i := range raw {
		raw[i] = byte(h >> (56 - 8*i))
	}
	return hex.AppendEncode(dst, raw[:])
}
