package schemas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHotKeyRecordKeyUnambiguous(t *testing.T) {
	pairs := [][2]string{{"a", "bc"}, {"ab", "c"}, {"", "1:ab"}, {"1:a", "b"}, {"", ""}, {"a", ""}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := string(HotKeyRecordKey(p[0], p[1]))
		if prev, dup := seen[k]; dup {
			t.Fatalf("HotKeyRecordKey(%q, %q) = %q, same as for %q", p[0], p[1], k, prev)
		}
		seen[k] = p
	}
	require.Equal(t, "4:shopproduct:42", string(HotKeyRecordKey("shop", "product:42")))
}

func TestHotKeyEventRoundTrip(t *testing.T) {
	h := &HotKeyEvent{Version: HotKeyVersion, Type: HotKeyHot, App: "shop", Key: "product:42",
		KeyHash: "9f1c0a4b5e6d7c8a", Rule: "hot-api", Rate: 5120.5, Threshold: 1000, Count: 5121,
		WindowMs: 1000, Topic: "keyheat.events", Partition: 3, OnsetMs: 1767225600123,
		DetectedMs: 1767225600131, Reads: 5000, Writes: 121, Bytes: 2621952,
		Mitigation: &Mitigation{Kind: MitigationLocalCache}}
	h.ID = HotKeyID(h.Topic, h.Partition, h.Rule, h.Type, h.App, h.Key, h.OnsetMs)
	b, err := h.AppendJSON(nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"id":"keyheat.events/3/hot-api/hot/4:shop/product:42/1767225600123",
		"type":"hot","app":"shop","key":"product:42","key_hash":"9f1c0a4b5e6d7c8a",
		"rule":"hot-api","rate":5120.5,"threshold":1000,"count":5121,"window_ms":1000,
		"topic":"keyheat.events","partition":3,"onset_ms":1767225600123,
		"detected_ms":1767225600131,"reads":5000,"writes":121,"bytes":2621952,
		"mitigation":{"kind":"local_cache"}}`, string(b))
	got, err := DecodeHotKeyEvent(b)
	require.NoError(t, err)
	require.Equal(t, h, got)

	for name, src := range map[string]string{
		"version":  `{"v":2,"type":"hot"}`,
		"type":     `{"v":1,"type":"warm"}`,
		"not json": `{"v":1,`,
	} {
		_, err := DecodeHotKeyEvent([]byte(src))
		require.Error(t, err, name)
	}
}

func TestPartitionWindowRoundTrip(t *testing.T) {
	w := &PartitionWindow{Version: WindowVersion, ID: PartitionWindowID("keyheat.events", 2, 1000),
		Topic: "keyheat.events", Partition: 2, Partitions: 8, StartMs: 1000, EndMs: 2000,
		FirstOffset: 10, LastOffset: 99, Events: 90, Late: 1, WatermarkMs: 2500, Keyed: true,
		Apps: []AppWindow{{App: "shop", Events: 90, Bytes: 900, Reads: 80, Writes: 10,
			Top:      []KeyCount{{App: "shop", Key: "k", Count: 50, Partition: 2}},
			Distinct: []byte{1, 2, 3}, Slots: []SlotCount{{Slot: 7, Events: 90}}}}}
	require.Equal(t, "keyheat.events/2/1000", w.ID)
	b, err := w.AppendJSON(nil)
	require.NoError(t, err)
	got, err := DecodePartitionWindow(b)
	require.NoError(t, err)
	require.Equal(t, w, got)

	_, err = DecodePartitionWindow([]byte(`{"v":1,"start_ms":2000,"end_ms":2000}`))
	require.ErrorContains(t, err, "not after start")
	_, err = DecodePartitionWindow([]byte(`{"v":9,"start_ms":0,"end_ms":1}`))
	require.ErrorContains(t, err, "version 9")
}

func TestWindowReportRoundTrip(t *testing.T) {
	r := &WindowReport{Version: ReportVersion, ID: WindowReportID(ScopeApp, "shop", 1000), Scope: ScopeApp,
		App: "shop", StartMs: 1000, EndMs: 2000, Topics: []string{"keyheat.events"}, Events: 10,
		Top:  []KeyCount{{App: "shop", Key: "k", Count: 5, Partition: 1, Share: 0.5}},
		Skew: Skew{Partitions: []PartitionLoad{{Topic: "keyheat.events", Partition: 1, Events: 10, Share: 1}}, MaxMean: 1}}
	require.Equal(t, "app/4:shop/1000", r.ID)
	require.Equal(t, "cluster/1000", WindowReportID(ScopeCluster, "", 1000))
	b, err := r.AppendJSON(nil)
	require.NoError(t, err)
	got, err := DecodeWindowReport(b)
	require.NoError(t, err)
	require.Equal(t, r, got)
	again, err := got.AppendJSON(nil)
	require.NoError(t, err)
	require.Equal(t, string(b), string(again), "encoding is deterministic")

	_, err = DecodeWindowReport([]byte(`{"v":1,"scope":"galaxy"}`))
	require.ErrorContains(t, err, "scope")
}
