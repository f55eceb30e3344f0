package pipeline

import (
	"math"

	"github.com/keyheat/keyheat/schemas"
)

// ThresholdFunc returns the hot threshold, events per second, of a key of
// app, and false when no rule watches the key. The service derives it from
// the detection rules, so the reports advise on the keys the rules call hot.
type ThresholdFunc func(app, key string) (ratePerS float64, ok bool)

// suggest is the mitigation advised for a hot key, in alerts and reports
// alike: a local cache when reads are at least as many as writes (a cache
// absorbs reads, and stale reads are the lesser harm), otherwise a split
// into the next power of two of writeRatePerS / capacityPerS physical keys,
// at least 2 (a split into one is no split) and at most MaxSplit.
func suggest(reads, writes uint64, writeRatePerS, capacityPerS float64) schemas.Mitigation {
	if reads >= writes {
		return schemas.Mitigation{Kind: schemas.MitigationLocalCache}
	}
	return schemas.Mitigation{Kind: schemas.MitigationSplit, Split: splitFor(writeRatePerS, capacityPerS)}
}

// splitFor is the smallest power of two n ≥ 2 with ratePerS / n ≤
// capacityPerS, capped at MaxSplit.
func splitFor(ratePerS, capacityPerS float64) int {
	n := 2
	for n < MaxSplit && ratePerS > float64(n)*capacityPerS {
		n *= 2
	}
	return n
}

// advise returns the advice for the keys of top whose lower-bound rate over
// a window of windowMs reached their threshold. Keys with neither reads nor
// writes (their operations are in neither list) get none: nothing says
// which remedy fits.
func advise(top []schemas.KeyCount, windowMs int64, threshold ThresholdFunc, capacityPerS float64) []schemas.KeyAdvice {
	if threshold == nil {
		return nil
	}
	seconds := float64(windowMs) / 1000
	var out []schemas.KeyAdvice
	for _, k := range top {
		if k.Reads+k.Writes == 0 {
			continue
		}
		thr, ok := threshold(k.App, k.Key)
		if !ok || math.IsNaN(thr) || math.IsInf(thr, 0) {
			continue // no rule, or no usable threshold (JSON cannot carry it)
		}
		rate := float64(k.Count-k.Error) / seconds
		if rate < thr {
			continue
		}
		out = append(out, schemas.KeyAdvice{
			App: k.App, Key: k.Key, Rate: rate, Threshold: thr,
			ReadShare:  float64(k.Reads) / float64(k.Reads+k.Writes),
			Mitigation: suggest(k.Reads, k.Writes, float64(k.Writes)/seconds, capacityPerS),
		})
	}
	return out
}
