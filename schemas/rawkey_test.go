package schemas_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// binaryKeys are keys that are not UTF-8 (events.codec: binary with
// events.allow_binary_keys: true). encoding/json alone turns the first two
// into the same "a\uFFFD".
var binaryKeys = []struct{ name, key string }{{"ff", "a\xff"}, {"fe", "a\xfe"}, {"nul", "bin\xff\x00key"}, {"lone continuation", "\x80"}}

// TestPartitionWindowKeepsBinaryKeys: the window summary that carries a
// key to the merger keeps it byte for byte in both forms; otherwise the
// merger adds two keys' counts into one report entry and the report's key
// no longer matches the hot-key event's or the one applications use.
func TestPartitionWindowKeepsBinaryKeys(t *testing.T) {
	for _, tc := range binaryKeys {
		key := tc.key
		t.Run(tc.name, func(t *testing.T) {
			w := &schemas.PartitionWindow{Version: schemas.WindowVersion, ID: "t/0/0", Topic: "t", Partitions: 1,
				StartMs: 0, EndMs: 1000, Events: 1, Keyed: true,
				Apps: []schemas.AppWindow{{App: "a", Events: 1, Top: []schemas.KeyCount{{App: "a", Key: key, Count: 1}}}}}
			j, err := w.AppendJSON(nil)
			require.NoError(t, err)
			for form, b := range map[string][]byte{"json": j, "binary": w.AppendBinary(nil)} {
				got, err := schemas.DecodePartitionWindow(b)
				require.NoError(t, err, form)
				require.Equal(t, []byte(key), []byte(got.Apps[0].Top[0].Key), "%s: the key survives the windows topic byte for byte", form)
			}
		})
	}
}

// TestReportAndHotKeyKeepBinaryKeys: reports and hot-key events are JSON;
// a key that is not UTF-8 is carried in key_b64 (and the hot-key ID in
// id_b64), which the decoders prefer, while "key" stays readable.
func TestReportAndHotKeyKeepBinaryKeys(t *testing.T) {
	for _, tc := range binaryKeys {
		key := tc.key
		t.Run(tc.name, func(t *testing.T) {
			r := &schemas.WindowReport{Version: schemas.ReportVersion, ID: "cluster/0", Scope: schemas.ScopeCluster,
				Top:    []schemas.KeyCount{{App: "a", Key: key, Count: 2}, {App: "a", Key: "text", Count: 1}},
				Advice: []schemas.KeyAdvice{{App: "a", Key: key, Rate: 2, Mitigation: schemas.Mitigation{Kind: schemas.MitigationLocalCache}}}}
			b, err := r.AppendJSON(nil)
			require.NoError(t, err)
			got, err := schemas.DecodeWindowReport(b)
			require.NoError(t, err)
			require.Equal(t, r.Top, got.Top)
			require.Equal(t, []byte(key), []byte(got.Advice[0].Key))

			var raw struct {
				Top []map[string]any `json:"top"`
			}
			require.NoError(t, json.Unmarshal(b, &raw))
			require.Contains(t, raw.Top[0], "key_b64", "a key that is not UTF-8 carries its bytes")
			require.NotContains(t, raw.Top[1], "key_b64", "a UTF-8 key is written as before")

			h := &schemas.HotKeyEvent{Version: schemas.HotKeyVersion, Type: schemas.HotKeyHot, App: "a", Key: key, Topic: "t"}
			h.ID = schemas.HotKeyID("t", 0, "r", h.Type, h.App, h.Key, 1)
			b, err = h.AppendJSON(nil)
			require.NoError(t, err)
			gotH, err := schemas.DecodeHotKeyEvent(b)
			require.NoError(t, err)
			require.Equal(t, h, gotH)
		})
	}
}

// TestKeyB64Preferred: a reader takes key_b64 over key, so a writer's
// readable U+FFFD form never becomes the key.
func TestKeyB64Preferred(t *testing.T) {
	var k schemas.KeyCount
	require.NoError(t, json.Unmarshal([]byte(`{"app":"a","key":"a\ufffd","key_b64":"Yf8=","count":1,"partition":0}`), &k))
	require.Equal(t, "a\xff", k.Key)
	require.NoError(t, json.Unmarshal([]byte(`{"app":"a","key":"plain","count":1,"partition":0}`), &k))
	require.Equal(t, "plain", k.Key)
	require.Error(t, json.Unmarshal([]byte(`{"key_b64":"not base64!"}`), &k))
}

func FuzzKeyCountJSON(f *testing.F) {
	for _, tc := range binaryKeys {
		f.Add(tc.key)
	}
	f.Add("product:42")
	f.Fuzz(func(t *testing.T, key string) {
		b, err := json.Marshal(schemas.KeyCount{App: "a", Key: key, Count: 1})
		require.NoError(t, err)
		var got schemas.KeyCount
		require.NoError(t, json.Unmarshal(b, &got))
		require.Equal(t, key, got.Key)
	})
}
