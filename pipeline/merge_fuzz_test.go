package pipeline

import (
	"bytes"
	"testing"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// FuzzMerge feeds decoded windows-topic records to a merger: whatever they
// hold, it must not panic, and every report it issues must encode.
func FuzzMerge(f *testing.F) {
	events := planMergeEvents([]int64{0, 1000}, []plannedKey{
		{"a", "k1", 5, 2, 10, 1}, {"a", "k2", 3, 0, 20, 2}, {"b", "k1", 2, 2, 30, 3},
	})
	for _, fx := range []mergeFixture{
		{topic: "t", partitions: 2, windowMs: 1000, keyed: true, capacity: 2, big: 1,
			hll: sketch.CardinalityConfig{Precision: 4, Sparse: true}},
		{topic: "t", partitions: 2, windowMs: 1000, capacity: 2, big: 1, final: true,
			hll: sketch.CardinalityConfig{Precision: 4, Sparse: true}, cms: sketch.CountMinConfig{Depth: 1, Width: 4}},
	} {
		var seed []byte
		for _, w := range fx.build(f, events) {
			b, err := w.AppendJSON(nil)
			if err != nil {
				f.Fatal(err)
			}
			seed = append(append(seed, b...), '\n')
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := testMergerConfig(3)
		cfg.MaxPendingWindows = 4
		cfg.RedisCluster.Shards = 2
		cfg.Threshold = func(string, string) (float64, bool) { return 1, true }
		m, err := NewMerger(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var out []MergedWindow
		for i, line := range bytes.Split(data, []byte("\n")) {
			w, err := schemas.DecodePartitionWindow(line)
			if err != nil {
				continue
			}
			_ = m.Add(w, int64(i), int64(i)*1000) // refusals are fine
			// Now and then the odd partitions fall silent.
			silent := i%4 == 3
			out = append(out, m.Ready(func(_ string, p int32) PartitionStatus { return PartitionStatus{Silent: silent && p%2 == 1} })...)
			if i%3 == 2 {
				m.Acked(w.StartMs)
			}
		}
		out = append(out, m.Finish()...)
		for _, mw := range out {
			for i := range mw.Reports {
				if _, err := mw.Reports[i].AppendJSON(nil); err != nil {
					t.Fatalf("report %s does not encode: %v", mw.Reports[i].ID, err)
				}
			}
		}
		if _, ok := m.CommitOffset(); !ok && len(out) > 0 {
			t.Fatal("reports issued but no commit offset")
		}
	})
}
