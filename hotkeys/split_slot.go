package hotkeys

import "github.com/keyheat/keyheat/internal/redisslot"

// splitSlots is the number of hash slots of a Redis Cluster.
const splitSlots = redisslot.Slots

// Slot returns the Redis Cluster hash slot of key, as CLUSTER KEYSLOT
// answers it: CRC16 (XMODEM: polynomial 0x1021, initial value 0, no
// reflection) of the key, modulo 16384. When the key holds a hash tag only
// the tag is hashed: the bytes between the first "{" and the first "}"
// after it, provided there is at least one. So "{user1000}.following" and
// "{user1000}.followers" share a slot, "foo{}{bar}" is hashed whole (its
// first tag is empty) and "foo{{bar}}" hashes "{bar".
func Slot(key string) int { return int(redisslot.Of(key)) }

// splitCRC16 feeds s into a CRC16-XMODEM register holding crc: the CRC of
// a+b is splitCRC16(splitCRC16(0, a), b), which lets a shard's slot be
// computed from its name's common prefix plus a few digits.
func splitCRC16(crc uint16, s string) uint16 { return redisslot.CRC16(crc, s) }
