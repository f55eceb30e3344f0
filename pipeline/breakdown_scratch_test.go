package pipeline

import (
	"testing"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

func BenchmarkScratchBreakdown(b *testing.B) {
	o := DefaultOptions()
	b.Run("loop-only", func(b *testing.B) {
		var s uint64
		benchLoop(b, 1000, func(e *schemas.AccessEvent, off int64) { s += uint64(len(e.Key)) })
		_ = s
	})
	b.Run("hash", func(b *testing.B) {
		var s uint64
		benchLoop(b, 1000, func(e *schemas.AccessEvent, off int64) { s += sketch.Hash(e.Key) })
		_ = s
	})
	b.Run("hash+topk", func(b *testing.B) {
		top, _ := sketch.NewTopK(sketch.TopKConfig{Capacity: o.Summary.TopCapacity, Sketch: sketch.CountMinConfig{Width: o.Summary.TopWidth}})
		benchLoop(b, 1000, func(e *schemas.AccessEvent, off int64) { top.AddHash(e.Key, sketch.Hash(e.Key), 1) })
	})
	b.Run("hash+cms", func(b *testing.B) {
		c, _ := sketch.NewCountMin(sketch.CountMinConfig{Depth: 4, Width: 4096, Conservative: true})
		benchLoop(b, 1000, func(e *schemas.AccessEvent, off int64) { c.AddHash(sketch.Hash(e.Key), 1) })
	})
	b.Run("hash+cms-plain", func(b *testing.B) {
		c, _ := sketch.NewCountMin(sketch.CountMinConfig{Depth: 4, Width: 4096})
		benchLoop(b, 1000, func(e *schemas.AccessEvent, off int64) { c.AddHash(sketch.Hash(e.Key), 1) })
	})
	b.Run("core-no-topk", func(b *testing.B) {
		p, _ := NewPartition(o, testSource, Start{})
		var out Output
		benchLoop(b, 1000, func(e *schemas.AccessEvent, off int64) {
			if e.TimeMs > p.maxTs {
				p.maxTs, p.started = e.TimeMs, true
				p.det.tick(&out)
			}
			h := sketch.Hash(e.Key)
			ad := p.det.app(e.App)
			cls := p.classify(e.Op)
			if x, g := ad.match(e.Key); x != nil {
				p.det.process(ad, x, g, e, e.Key, h, cls, &out)
			}
			out.Reset()
		})
	})
}
