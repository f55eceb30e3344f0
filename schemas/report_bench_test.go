package schemas

import (
	"encoding/json"
	"strconv"
	"testing"
)

// benchReport is a report of the size the merger writes per app: five
// rankings of 100 keys, 1,000 partition loads, six nodes, ten hot slots.
func benchReport() *WindowReport {
	keys := func(n int) []KeyCount {
		out := make([]KeyCount, n)
		for i := range out {
			out[i] = KeyCount{App: "shop", Key: "user:" + strconv.Itoa(i*7919) + ":profile", Count: uint64(100_000 - i*13),
				Error: uint64(i % 7), Bytes: uint64(i * 512), Reads: uint64(80_000 - i), Writes: uint64(i * 3),
				LatencyUs: uint64(i * 870), Partition: -1, Share: float64(100_000-i*13) / 9_876_543}
		}
		return out
	}
	r := &WindowReport{Version: ReportVersion, ID: WindowReportID(ScopeApp, "shop", 1767225600000), Scope: ScopeApp, App: "shop",
		StartMs: 1767225600000, EndMs: 1767225601000, Topics: []string{"keyheat.events"},
		Events: 9_876_543, Bytes: 5_000_000_000, Reads: 8_000_000, Writes: 1_876_543, LatencyUs: 123_456_789, Distinct: 1_234_567,
		Top: keys(100), Floor: 812, Guaranteed: 37, Approximate: true,
		TopBytes: keys(100), TopReads: keys(100), TopWrites: keys(100), TopLatency: keys(100)}
	for p := range 1000 {
		r.Skew.Partitions = append(r.Skew.Partitions, PartitionLoad{Topic: "keyheat.events", Partition: int32(p),
			Events: uint64(9876 + p), Bytes: uint64(5_000_000 + p), Share: float64(9876+p) / 9_876_543})
	}
	r.Skew.MaxMean, r.Skew.Gini, r.Skew.Top1Share, r.Skew.Top10Share = 1.2345, 0.0321, 0.0101, 0.0934
	for n := range 6 {
		r.Skew.Nodes = append(r.Skew.Nodes, NodeLoad{Node: "shard-" + strconv.Itoa(n), FirstSlot: uint16(n * 2730),
			LastSlot: uint16(n*2730 + 2729), Events: uint64(1_600_000 + n), Share: 0.1666})
	}
	for s := range 10 {
		r.Skew.HotSlots = append(r.Skew.HotSlots, SlotCount{Slot: uint16(s * 997), Events: uint64(50_000 - s)})
	}
	for i := range 10 {
		r.Advice = append(r.Advice, KeyAdvice{App: "shop", Key: r.Top[i].Key, Rate: 99_000.5, Threshold: 10_000,
			ReadShare: 0.97, Mitigation: Mitigation{Kind: MitigationLocalCache}})
	}
	return r
}

// BenchmarkReportJSON is one report's encoding: AppendJSON (hand-written)
// against encoding/json, which writes the same bytes.
func BenchmarkReportJSON(b *testing.B) {
	r := benchReport()
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = r.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			out, err := json.Marshal(r)
			if err != nil {
				b.Fatal(err)
			}
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
}

func TestBenchReportMatchesEncodingJSON(t *testing.T) { requireSameJSON(t, benchReport()) }
