package schemas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEventRowRoundTrip(t *testing.T) {
	e := AccessEvent{TimeMs: 1767225600123, Key: "product:42\xff", App: "shop", Op: "GET", Bytes: 512,
		Status: 200, Client: "10.0.0.1", Node: "redis-3", LatencyUs: 77}
	r := MakeEventRow("keyheat.events", 3, 9001, 2, &e)
	require.Equal(t, EventRow{TimeMs: e.TimeMs, App: "shop", Key: e.Key, Op: "GET", Bytes: 512, Status: 200,
		Client: "10.0.0.1", Node: "redis-3", LatencyUs: 77, Topic: "keyheat.events", Partition: 3, Offset: 9001, Index: 2}, r)
	require.Equal(t, e, r.Event(), "the event comes back exactly, bytes that are not UTF-8 included")
}

func TestHotKeyRowRoundTrip(t *testing.T) {
	base := HotKeyEvent{Version: HotKeyVersion, ID: "id", Type: HotKeyHot, App: "shop", Key: "k", KeyHash: "00",
		Rule: "r", Rate: 1.5, Threshold: 1, Count: 3, WindowMs: 1000, Topic: "t", Partition: 2,
		OnsetMs: 10, DetectedMs: 12, Reads: 2, Writes: 1, Bytes: 30}
	tests := []struct {
		name    string
		change  func(*HotKeyEvent)
		wantErr string
	}{
		{"hot with a split", func(h *HotKeyEvent) { h.Mitigation = &Mitigation{Kind: MitigationSplit, Split: 8} }, ""},
		{"hot with a cache", func(h *HotKeyEvent) { h.Mitigation = &Mitigation{Kind: MitigationLocalCache} }, ""},
		{"hot with its peak", func(h *HotKeyEvent) { h.PeakRate = h.Rate }, ""},
		{"update with rate, peak and split", func(h *HotKeyEvent) {
			h.Type, h.Rate, h.PeakRate, h.Mitigation = HotKeyUpdate, 3100, 3100, &Mitigation{Kind: MitigationSplit, Split: 4}
		}, ""},
		{"cooled without mitigation", func(h *HotKeyEvent) { h.Type = HotKeyCooled }, ""},
		{"cooled with the episode's peak", func(h *HotKeyEvent) { h.Type, h.Rate, h.PeakRate = HotKeyCooled, 0, 3100 }, ""},
		{"mitigation without kind", func(h *HotKeyEvent) { h.Mitigation = &Mitigation{Split: 2} }, "without a kind"},
		{"count beyond int64", func(h *HotKeyEvent) { h.Count = 1 << 63 }, "signed 64-bit"},
		{"partition alert with its error", func(h *HotKeyEvent) { h.Error = 7 }, ""},
		{"cluster alert", func(h *HotKeyEvent) {
			h.Partition, h.Partitions, h.Error = ClusterPartition, []int32{0, 2, 5}, 91
		}, ""},
		{"error beyond int64", func(h *HotKeyEvent) { h.Error = 1 << 63 }, "error 9223372036854775808 does not fit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := base
			tc.change(&h)
			row, err := MakeHotKeyRow(&h)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			got, err := row.HotKeyEvent()
			require.NoError(t, err)
			require.Equal(t, &h, got)
		})
	}
}

// TestHotKeyRowNoPartitions: a row without partitions, which is how an
// empty list reads back from Parquet, gives nil, as the JSON omits them.
func TestHotKeyRowNoPartitions(t *testing.T) {
	for _, p := range [][]int32{nil, {}} {
		r := HotKeyRow{ID: "a", Type: HotKeyHot, Partition: 2, Partitions: p}
		h, err := r.HotKeyEvent()
		require.NoError(t, err)
		require.Nil(t, h.Partitions)
	}
}

func TestHotKeyRowRejects(t *testing.T) {
	for _, r := range []HotKeyRow{{ID: "a", Type: "warm"}, {ID: "b", Type: HotKeyHot, Count: -1},
		{ID: "c", Type: HotKeyHot, Error: -1}} {
		_, err := r.HotKeyEvent()
		require.Error(t, err, "row %s", r.ID)
	}
}

func TestReportRowRoundTrip(t *testing.T) {
	r := &WindowReport{Version: ReportVersion, ID: WindowReportID(ScopeApp, "shop", 1000), Scope: ScopeApp, App: "shop",
		StartMs: 1000, EndMs: 2000, Topics: []string{"keyheat.events"}, Events: 10, Bytes: 100, Reads: 7, Writes: 3,
		Distinct: 4, Keyed: true,
		Top:  []KeyCount{{App: "shop", Key: "k", Count: 6, Error: 1, Bytes: 60, Partition: 2, Share: 0.6}},
		Skew: Skew{MaxMean: 1.5, Gini: 0.2, Top1Share: 0.6, Top10Share: 1}}
	row, err := MakeReportRow(r)
	require.NoError(t, err)
	require.Equal(t, []ReportTopEntry{{App: "shop", Key: "k", Count: 6, Error: 1, Bytes: 60, Share: 0.6}}, row.Top)
	require.Equal(t, int64(10), row.Events)
	require.Equal(t, 1.5, row.MaxMean)
	got, err := row.Report()
	require.NoError(t, err)
	require.Equal(t, r, got, "the report comes back from its JSON column exactly")

	r.Bytes = 1 << 63
	_, err = MakeReportRow(r)
	require.ErrorContains(t, err, "signed 64-bit")
}
