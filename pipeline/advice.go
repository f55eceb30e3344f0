package pipeline

import (
	"fmt"
	"math"

	"github.com/keyheat/keyheat/schemas"
)

// AdviceOptions configure the mitigation suggested for a hot key.
type AdviceOptions struct {
	// NodeWriteCapacity is the write rate, per second, that one node of the
	// store behind the application takes for a single key. A write-heavy
	// hot key is split into enough physical keys that each stays below it.
	NodeWriteCapacity float64 `mapstructure:"node_write_capacity"`
}

// DefaultAdviceOptions: 10,000 writes per second per node and key, a
// cautious figure for a Redis node serving other keys too; set it to what
// one node of your store sustains.
func DefaultAdviceOptions() AdviceOptions {
	return AdviceOptions{NodeWriteCapacity: 10_000}
}

// Validate reports an unusable option, naming it.
func (o AdviceOptions) Validate() error {
	if !(o.NodeWriteCapacity > 0) || math.IsInf(o.NodeWriteCapacity, 0) {
		return fmt.Errorf("node_write_capacity: %v, want a positive number of writes per second, e.g. 10000", o.NodeWriteCapacity)
	}
	return nil
}

// ThresholdFunc returns the hot threshold, events per second, of a key of
// app, and false when no rule watches the key. The service derives it from
// the detection rules, so the reports advise on the keys the rules call hot.
type ThresholdFunc func(app, key string) (ratePerS float64, ok bool)

// mitigation suggests what to do about a hot key from its reads and writes
// in a window and its write rate: a local cache when reads are at least as
// many as writes (a cache absorbs reads, and stale reads are the lesser
// harm), otherwise a split into the next power of two of writeRatePerS /
// NodeWriteCapacity physical keys, at least 2 (a split into one is no
// split) and at most MaxMergeSplit.
func (o AdviceOptions) mitigation(reads, writes uint64, writeRatePerS float64) schemas.Mitigation {
	if reads >= writes {
		return schemas.Mitigation{Kind: schemas.MitigationLocalCache}
	}
	return schemas.Mitigation{Kind: schemas.MitigationSplit, Split: splitFor(writeRatePerS, o.NodeWriteCapacity)}
}

// splitFor is the smallest power of two n ≥ 2 with ratePerS / n ≤
// capacityPerS, capped at MaxMergeSplit.
func splitFor(ratePerS, capacityPerS float64) int {
	n := 2
	for n < MaxMergeSplit && ratePerS > float64(n)*capacityPerS {
		n *= 2
	}
	return n
}

// advise returns the advice for the keys of top whose lower-bound rate over
// a window of windowMs reached their threshold. Keys with neither reads nor
// writes (their operations are in neither list) get none: nothing says
// which remedy fits.
func (o AdviceOptions) advise(top []schemas.KeyCount, windowMs int64, threshold ThresholdFunc) []schemas.KeyAdvice {
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
			Mitigation: o.mitigation(k.Reads, k.Writes, float64(k.Writes)/seconds),
		})
	}
	return out
}
