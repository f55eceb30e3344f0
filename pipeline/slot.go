package pipeline

import "strings"

// RedisSlots is the number of hash slots of a Redis Cluster.
const RedisSlots = 16384

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM: poly
// 0x1021, init 0, no reflection) of the key modulo 16384, or, when the key
// holds a hash tag, of the tag alone. The tag is what lies between the
// first "{" and the first "}" after it, and counts only when it is not
// empty; otherwise the whole key is hashed. So "{user1000}.following" and
// "{user1000}.followers" share a slot, "foo{}{bar}" hashes whole, and
// "foo{{bar}}" hashes "{bar" (Redis Cluster specification, "Hash tags").
func Slot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return crc16(key) & (RedisSlots - 1)
}

// crc16 is CRC16-XMODEM, eight bytes per step ("slicing-by-8"): the CRC of
// a byte followed by k zero bytes is crcTab[k][byte], and the CRC is linear,
// so eight table lookups replace eight dependent shift-and-xor rounds. Keys
// are hashed once per event, so this is on the per-event path.
func crc16(s string) uint16 {
	var crc uint16
	for len(s) >= 8 {
		hi := byte(crc>>8) ^ s[0]
		lo := byte(crc) ^ s[1]
		crc = crcTab[7][hi] ^ crcTab[6][lo] ^ crcTab[5][s[2]] ^ crcTab[4][s[3]] ^
			crcTab[3][s[4]] ^ crcTab[2][s[5]] ^ crcTab[1][s[6]] ^ crcTab[0][s[7]]
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTab[0][byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTab[k][b] is the CRC16-XMODEM register after feeding byte b into a
// zero register and then k zero bytes.
var crcTab = func() (t [8][256]uint16) {
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
