package hotkeys

import (
	"encoding/hex"
	"strconv"

	"github.com/zeebo/xxh3"
)

// Shard names.
//
// Shard i of a split key K is the Redis key
//
//	{hk:<h>:<c>}s:K
//
// where <h> is the 16 hex digits of K's 64-bit xxh3 hash (Entry.KeyHash)
// and <c> a decimal candidate number. The braces make "hk:<h>:<c>" the
// key's hash tag, so its Redis Cluster slot is chosen by us alone: a tag
// inside K cannot pull the shards back onto K's slot (a suffix could not
// escape "{user1}…"), and binary keys need no escaping. The candidates
// are taken greedily: c = 0, 1, 2, … is accepted as the next shard when
// its slot differs from K's and from every shard accepted before it. So
// the N shards of a key sit on N distinct slots, none of them K's, and
// the first N shards of a factor 2N are those of factor N: growing a
// key's factor leaves every shard written so far among those read.
//
// The mapping depends only on K, so every process computes the same
// names. "s:" marks a shard; "f:" marks the shard's fold record in a
// cluster (see Fold), a hash on the shard's slot. Keys starting with
// "{hk:" are keyheat's: an application's own keys must not.
const (
	splitTagPrefix = "{hk:"
	splitShardMark = "}s:"
	splitFoldMark  = "}f:"
)

// MaxSplitFactor is the largest split factor a Splitter uses; an entry
// asking for more is served with this many shards. More shards than a
// cluster has nodes buy nothing, and a read touches every shard.
const MaxSplitFactor = 1024

// splitNames computes a key's shard names.
type splitNames struct {
	key   string
	h     uint64   // xxh3(key), Entry.KeyHash
	hash  [16]byte // hex of h
	base  uint16   // CRC16 register after "hk:<hash>:"
	avoid uint16   // the key's own slot
	cands []uint16 // candidate numbers of the shards found so far, in order
}

func newSplitNames(key string) *splitNames {
	n := &splitNames{key: key, h: xxh3.HashString(key), avoid: uint16(Slot(key))}
	var h [8]byte
	for i := range h {
		h[i] = byte(n.h >> (56 - 8*i))
	}
	hex.Encode(n.hash[:], h[:])
	n.base = splitCRC16(splitCRC16(0, splitTagPrefix[1:]), string(n.hash[:]))
	n.base = splitCRC16(n.base, ":")
	return n
}

// keyHash is the key's xxh3 hash, the only form of it that logs and
// errors show.
func (n *splitNames) keyHash() uint64 { return n.h }

// grow finds the candidates of the first n shards (n ≤ MaxSplitFactor).
func (n *splitNames) grow(want int) {
	if len(n.cands) >= want {
		return
	}
	var used [splitSlots / 64]uint64
	used[n.avoid/64] |= 1 << (n.avoid % 64)
	for _, c := range n.cands {
		s := n.slotOf(int(c))
		used[s/64] |= 1 << (s % 64)
	}
	c := 0
	if len(n.cands) > 0 {
		c = int(n.cands[len(n.cands)-1]) + 1
	}
	for ; len(n.cands) < want; c++ {
		s := n.slotOf(c)
		if used[s/64]&(1<<(s%64)) != 0 {
			continue
		}
		used[s/64] |= 1 << (s % 64)
		n.cands = append(n.cands, uint16(c))
	}
}

// slotOf is the slot of candidate c's names.
func (n *splitNames) slotOf(c int) uint16 {
	var d [8]byte
	return splitCRC16(n.base, string(strconv.AppendInt(d[:0], int64(c), 10))) & (splitSlots - 1)
}

// shard is the name of shard i; grow(i+1) must have run.
func (n *splitNames) shard(i int) string { return n.name(i, splitShardMark) }

// foldRec is the name of shard i's fold record, on its slot.
func (n *splitNames) foldRec(i int) string { return n.name(i, splitFoldMark) }

func (n *splitNames) name(i int, mark string) string {
	b := make([]byte, 0, len(splitTagPrefix)+len(n.hash)+1+5+len(mark)+len(n.key))
	b = append(b, splitTagPrefix...)
	b = append(b, n.hash[:]...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(n.cands[i]), 10)
	b = append(b, mark...)
	b = append(b, n.key...)
	return string(b)
}
