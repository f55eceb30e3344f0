package sketch

import (
	"github.com/zeebo/xxh3"
)

// Hash returns the 64-bit hash from which every structure in this package
// derives a key's positions: xxh3 of the key. A caller that counts one key
// in several structures (a detector: a Count-Min, a top-K and a distinct
// count per event) hashes it once with Hash and passes the result to their
// ...Hash methods, which then agree exactly with the methods that take the
// key.
func Hash(key string) uint64 { return xxh3.HashString(key) }

// hashString returns one 64-bit hash per key. Every structure in the package
// derives all of its indexes from this single value, so a key is hashed once
// per Add no matter how many rows a sketch has.
func hashString(s string, seed uint64) uint64 { return seeded(xxh3.HashString(s), seed) }

// seeded folds a non-zero seed into a key's Hash with a full 64-bit
// finalizer: two sketches with different seeds then place keys
// independently (apart from full 64-bit xxh3 collisions, which are
// negligible).
func seeded(h, seed uint64) uint64 {
	if seed != 0 {
		h = mix64(h ^ seed)
	}
	return h
}

// mix64 is the splitmix64 / murmur3 finalizer: a bijection on uint64 with
// full avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// rowStep returns the two halves used for double hashing
// (Kirsch & Mitzenmacher): column of row i is reduce(h1 + i*h2). h2 is forced
// odd so that it is never zero, which would put a key in the same column on
// every row.
func rowStep(h uint64) (h1, h2 uint32) {
	return uint32(h), uint32(h>>32) | 1
}

// reduce maps a uniformly distributed 32-bit value onto [0, n) without a
// division (Lemire's multiply-shift range reduction).
func reduce(x uint32, n uint32) uint32 {
	return uint32((uint64(x) * uint64(n)) >> 32)
}

// satAdd adds without wrapping: a counter that would overflow stays at the
// maximum, which keeps every estimate an upper bound.
func satAdd(a, b uint64) uint64 {
	c := a + b
	if c < a {
		return ^uint64(0)
	}
	return c
}
