package schemas_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// TestPartitionWindowKeepsBinaryKeys (review-2, finding 5): with
// events.codec: binary and events.allow_binary_keys: true a key need not
// be UTF-8, and the window summary that carries it to the merger must keep
// it byte for byte. encoding/json replaces invalid bytes with U+FFFD, so
// "a\xff" and "a\xfe" both arrive as "a\uFFFD": the merger then adds two
// keys' counts into one report entry (seen end to end: 1500 + 700 events
// reported as one key with 2200), and the report's key no longer matches
// the hot-key event's or the one applications use.
func TestPartitionWindowKeepsBinaryKeys(t *testing.T) {
	for _, tc := range []struct{ name, key string }{{"ff", "a\xff"}, {"fe", "a\xfe"}, {"nul", "bin\xff\x00key"}} {
		key := tc.key
		t.Run(tc.name, func(t *testing.T) {
			w := &schemas.PartitionWindow{Version: schemas.WindowVersion, ID: "t/0/0", Topic: "t", Partitions: 1,
				StartMs: 0, EndMs: 1000, Events: 1, Keyed: true,
				Apps: []schemas.AppWindow{{App: "a", Events: 1, Top: []schemas.KeyCount{{App: "a", Key: key, Count: 1}}}}}
			b, err := w.AppendJSON(nil)
			require.NoError(t, err)
			got, err := schemas.DecodePartitionWindow(b)
			require.NoError(t, err)
			require.Equal(t, []byte(key), []byte(got.Apps[0].Top[0].Key), "the key survives the windows topic byte for byte")
		})
	}
}
