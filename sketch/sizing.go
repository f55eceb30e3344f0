package sketch

import "math"

// Sizing formulas (Cormode & Muthukrishnan 2005):
//
//	width  w = ⌈e / ε⌉        over-estimate ≤ ε·N with probability ≥ 1 − δ
//	depth  d = ⌈ln(1 / δ)⌉
//	bytes    = d · w · 8       (uint64 counters)
//
// A top-K adds about TopKEntryBytes(keyLen) per tracked key on top of its own
// Count-Min filter.

// DimensionsForError returns the smallest depth and width whose Count-Min
// estimates exceed the true count by at most epsilon·N with probability at
// least 1 − delta. Both must lie in (0, 1).
func DimensionsForError(epsilon, delta float64) (depth, width int, err error) {
	if !(epsilon > 0 && epsilon < 1) || !(delta > 0 && delta < 1) {
		return 0, 0, invalidf("epsilon %v and delta %v must both lie in (0, 1)", epsilon, delta)
	}
	w := math.Ceil(math.E / epsilon)
	d := math.Ceil(math.Log(1 / delta))
	if w > MaxWidth || d > MaxDepth {
		return 0, 0, invalidf("epsilon %v, delta %v need %vx%v counters, over the %dx%d limit", epsilon, delta, d, w, MaxDepth, MaxWidth)
	}
	return int(d), int(w), nil
}

// DimensionsForBudget returns the widest Count-Min of the given depth whose
// counters fit in budget bytes (0 depth means DefaultDepth). Its error bound
// is then ε = e / width, δ = e^-depth (see CountMinConfig.Epsilon and Delta).
func DimensionsForBudget(budget, depth int) (CountMinConfig, error) {
	if depth == 0 {
		depth = DefaultDepth
	}
	if depth < 1 || depth > MaxDepth {
		return CountMinConfig{}, invalidf("depth %d: want 1..%d", depth, MaxDepth)
	}
	w := budget / (8 * depth)
	if w < 1 {
		return CountMinConfig{}, invalidf("budget of %d bytes cannot hold one column of depth %d (needs %d bytes)", budget, depth, 8*depth)
	}
	w = min(w, MaxWidth)
	return CountMinConfig{Depth: depth, Width: w}, nil
}

// TopKEntryBytes is the memory one tracked key costs a TopK: the entry
// (key header, hash, two counts, table slot index: 48 bytes) and the copied
// key rounded up to Go's 8-byte allocation class. The hash table adds
// TopKTableBytes(capacity) once.
func TopKEntryBytes(keyLen int) int {
	return topKEntryBytes + roundUp8(keyLen)
}

// TopKTableBytes is the size of a TopK's hash table: the smallest power of
// two of 4-byte slots that keeps the load at or below one half.
func TopKTableBytes(capacity int) int { return tableSlots(capacity) * 4 }

const topKEntryBytes = 48

func tableSlots(capacity int) int {
	n := 2
	for n < 2*capacity {
		n <<= 1
	}
	return n
}

func roundUp8(n int) int { return (n + 7) &^ 7 }

// TopKConfigForBudget splits a memory budget between a TopK's tracked keys
// and its Count-Min admission filter: capacity keys of about keyLen bytes
// each, and the rest to a Count-Min of DefaultDepth rows. It fails when the
// keys alone leave less than 1 KiB for the filter.
//
// The accuracy tests use TopKConfigForBudget(1<<20, 2048, 32).
func TopKConfigForBudget(budget, capacity, keyLen int) (TopKConfig, error) {
	if capacity < 1 || capacity > MaxTopKCapacity {
		return TopKConfig{}, invalidf("top-k capacity %d: want 1..%d", capacity, MaxTopKCapacity)
	}
	rest := budget - TopKTableBytes(capacity) - capacity*TopKEntryBytes(keyLen)
	if rest < 1024 {
		return TopKConfig{}, invalidf("budget of %d bytes leaves %d for the count-min filter after %d keys of %d bytes; lower the capacity", budget, rest, capacity, keyLen)
	}
	cms, err := DimensionsForBudget(rest, DefaultDepth)
	if err != nil {
		return TopKConfig{}, err
	}
	return TopKConfig{Capacity: capacity, Sketch: cms}, nil
}
