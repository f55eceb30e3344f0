// Package redisslot computes Redis Cluster hash slots: CRC16 (XMODEM:
// polynomial 0x1021, initial value 0, no reflection) of a key, or of its
// hash tag, modulo 16384, as CLUSTER KEYSLOT answers. detect counts load
// per slot with it, and the hotkeys splitter places a hot key's shards on
// distinct slots with it.
package redisslot

import "strings"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Of returns the Redis Cluster hash slot of key. When the key holds a hash
// tag only the tag is hashed: the bytes between the first "{" and the
// first "}" after it, provided there is at least one. So
// "{user1000}.following" and "{user1000}.followers" share a slot,
// "foo{}{bar}" is hashed whole (its first tag is empty) and "foo{{bar}}"
// hashes "{bar" (Redis Cluster specification, "Hash tags").
func Of(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return CRC16(0, key) & (Slots - 1)
}

// CRC16 feeds s into a CRC16-XMODEM register holding crc and returns the
// register: the CRC of a+b is CRC16(CRC16(0, a), b), which lets a caller
// hash a common prefix once.
//
// It takes eight bytes per step ("slicing-by-8"): the CRC of a byte
// followed by k zero bytes is tab[k][byte], and the CRC is linear, so
// eight table lookups replace eight dependent shift-and-xor rounds. Keys
// are hashed once per event, so this is on detect's per-event path.
func CRC16(crc uint16, s string) uint16 {
	for len(s) >= 8 {
		hi := byte(crc>>8) ^ s[0]
		lo := byte(crc) ^ s[1]
		crc = tab[7][hi] ^ tab[6][lo] ^ tab[5][s[2]] ^ tab[4][s[3]] ^
			tab[3][s[4]] ^ tab[2][s[5]] ^ tab[1][s[6]] ^ tab[0][s[7]]
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ tab[0][byte(crc>>8)^s[i]]
	}
	return crc
}

// tab[k][b] is the CRC16-XMODEM register after feeding byte b into a zero
// register and then k zero bytes.
var tab = func() (t [8][256]uint16) {
	for b := range 256 {
		c := uint16(b) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[0][b] = c
	}
	for k := 1; k < 8; k++ {
		for b := range 256 {
			p := t[k-1][b]
			t[k][b] = p<<8 ^ t[0][p>>8]
		}
	}
	return t
}()
