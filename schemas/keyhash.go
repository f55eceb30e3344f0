package schemas

import (
	"encoding/binary"
	"encoding/hex"

	"github.com/zeebo/xxh3"
)

// KeyHash returns a key's key_hash (HotKeyEvent.KeyHash): 16 lowercase
// hex digits of its 64-bit xxh3 hash, big-endian. It is how a key shows
// where the key itself must not: log lines, metric labels, dashboards.
func KeyHash(key string) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], xxh3.HashString(key))
	return hex.EncodeToString(b[:])
}
