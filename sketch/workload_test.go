package sketch

import (
	"math/rand/v2"
	"strconv"
)

// workload is a fixed-seed synthetic stream of key ids. Ids below space are
// counted by the oracle; ids at or above space are generated once each (the
// flood's never-repeated keys), so their true count is 1 without storing it.
type workload struct {
	name  string
	space uint64
	gen   func() uint64
}

// eventsForTest is 10M normally and 1M under -short or the race detector.
func eventsForTest(short bool) int {
	if short || raceEnabled {
		return 1_000_000
	}
	return 10_000_000
}

// appendKey formats id as a realistic 20–25 byte access key.
func appendKey(dst []byte, id uint64) []byte {
	dst = append(dst, "tenant-7:user:"...)
	return strconv.AppendUint(dst, id, 10)
}

// keyOf is appendKey as a string, the form the package takes keys in.
func keyOf(id uint64) string { return string(appendKey(nil, id)) }

// zipfWorkload: Zipf s=1.1 over 1M keys.
func zipfWorkload(seed uint64) workload {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.1, 1, 1_000_000-1)
	return workload{name: "zipf1.1", space: 1_000_000, gen: z.Uint64}
}

// plantedWorkload: 5M near-uniform keys plus 20 planted keys (ids 0..19)
// with 0.2 % of the events each.
func plantedWorkload(seed uint64) workload {
	r := rand.New(rand.NewPCG(seed, 2))
	return workload{name: "uniform+planted", space: 5_000_020, gen: func() uint64 {
		if r.Uint64N(1000) < 40 {
			return r.Uint64N(20)
		}
		return 20 + r.Uint64N(5_000_000)
	}}
}

// floodWorkload: 90 % of events are never-repeated keys, 10 % go to 50 hot
// keys (ids 0..49).
func floodWorkload(seed uint64) workload {
	r := rand.New(rand.NewPCG(seed, 3))
	next := uint64(50)
	return workload{name: "flood", space: 50, gen: func() uint64 {
		if r.Uint64N(10) == 0 {
			return r.Uint64N(50)
		}
		next++
		return next
	}}
}
