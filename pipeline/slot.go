package pipeline

import "github.com/keyheat/keyheat/internal/redisslot"

// RedisSlots is the number of hash slots of a Redis Cluster.
const RedisSlots = redisslot.Slots

// Slot returns the Redis Cluster hash slot of key, as CLUSTER KEYSLOT
// answers it (see package redisslot for the hash-tag rule).
func Slot(key string) uint16 { return redisslot.Of(key) }
