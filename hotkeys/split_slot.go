package hotkeys

import "strings"

// splitSlots is the number of hash slots of a Redis Cluster.
const splitSlots = 16384

// Slot returns the Redis Cluster hash slot of key, as CLUSTER KEYSLOT
// answers it: CRC16 (XMODEM: polynomial 0x1021, initial value 0, no
// reflection) of the key, modulo 16384. When the key holds a hash tag only
// the tag is hashed: the bytes between the first "{" and the first "}"
// after it, provided there is at least one. So "{user1000}.following" and
// "{user1000}.followers" share a slot, "foo{}{bar}" is hashed whole (its
// first tag is empty) and "foo{{bar}}" hashes "{bar".
func Slot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(splitCRC16(0, key) & (splitSlots - 1))
}

// splitCRC16 feeds s into a CRC16-XMODEM register holding crc: the CRC of
// a+b is splitCRC16(splitCRC16(0, a), b), which lets a shard's slot be
// computed from its name's common prefix plus a few digits.
func splitCRC16(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ splitCRC16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

// splitCRC16Table[b] is the register after feeding byte b into a zero register.
var splitCRC16Table = func() (t [256]uint16) {
	for b := range 256 {
		c := uint16(b) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[b] = c
	}
	return t
}()
