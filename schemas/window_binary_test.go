package schemas

import (
	"bytes"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// fullWindow sets every field of a summary, sketches and bounds included,
// with nothing the JSON form cannot carry (it replaces invalid UTF-8 and
// drops empty omitempty fields).
func fullWindow() *PartitionWindow {
	return &PartitionWindow{Version: WindowVersion, ID: PartitionWindowID("keyheat.events", 2, -1000),
		Topic: "keyheat.events", Partition: 2, Partitions: 8, StartMs: -1000, EndMs: 2000,
		FirstOffset: -1, LastOffset: math.MaxInt64, Events: math.MaxUint64, Late: 1, WatermarkMs: 2500,
		Keyed: true, Final: true, Approximate: true,
		Apps: []AppWindow{
			{App: "shop", Events: 90, Bytes: 900, Reads: 80, Writes: 10, LatencyUs: 7, Floor: 3, Approximate: true,
				Top: []KeyCount{{App: "shop", Key: "k\x00é", Count: 50, Error: 1, Bytes: 2, Reads: 3, Writes: 4,
					LatencyUs: 5, Partition: -1, Share: 0.25, BytesError: 6}, {App: "shop", Key: "", Count: 1, Shortened: true}},
				Big:        []KeyCount{{App: "shop", Key: "big", Bytes: 1 << 40, Partition: math.MaxInt32}},
				TopReads:   []KeyCount{{App: "shop", Key: "r", Count: 9, Reads: 9}},
				TopWrites:  []KeyCount{{App: "shop", Key: "w", Count: 8, Writes: 8, Shortened: true}},
				TopLatency: []KeyCount{{App: "shop", Key: "l", Count: 7, LatencyUs: 1 << 50}},
				Distinct:   []byte{1, 2, 3}, Sketch: []byte{4},
				Slots: []SlotCount{{Slot: 7, Events: 90}, {Slot: 16383, Events: 1}, {Slot: 0, Events: 2}}},
			{App: OtherApp, Top: []KeyCount{}},
			{},
		}}
}

// TestPartitionWindowBinary: the binary form decodes to the summary
// encoded, and to what the JSON form decodes to.
func TestPartitionWindowBinary(t *testing.T) {
	for name, w := range map[string]*PartitionWindow{
		"full":    fullWindow(),
		"no apps": {Version: WindowVersion, StartMs: 0, EndMs: 1},
		"empty":   {Version: WindowVersion, StartMs: 0, EndMs: 1, Apps: []AppWindow{}},
	} {
		t.Run(name, func(t *testing.T) {
			b := w.AppendBinary([]byte("prefix"))
			require.Equal(t, "prefix", string(b[:6]), "appends")
			got, err := DecodePartitionWindow(b[6:])
			require.NoError(t, err)
			require.Equal(t, w, got)

			js, err := w.AppendJSON(nil)
			require.NoError(t, err)
			viaJSON, err := DecodePartitionWindow(js)
			require.NoError(t, err)
			require.Equal(t, viaJSON, got, "JSON and binary forms decode alike")
		})
	}
}

// TestPartitionWindowBinaryAsJSON: the binary form decodes as the JSON
// form does where that one loses something (empty lists it omits), and
// keeps bytes that are not UTF-8, which JSON replaces.
func TestPartitionWindowBinaryAsJSON(t *testing.T) {
	w := fullWindow()
	w.Apps[0].Sketch, w.Apps[1].Slots, w.Apps[1].Distinct, w.Apps[1].Big = []byte{}, []SlotCount{}, []byte{}, []KeyCount{}
	js, err := w.AppendJSON(nil)
	require.NoError(t, err)
	viaJSON, err := DecodePartitionWindow(js)
	require.NoError(t, err)
	got, err := DecodePartitionWindow(w.AppendBinary(nil))
	require.NoError(t, err)
	require.Equal(t, viaJSON, got)
	require.Nil(t, got.Apps[1].Slots, "empty omitted lists decode as nil")
	require.NotNil(t, got.Apps[1].Top, "an empty top list stays empty")

	w.Apps[0].Top[0].Key = "k\xff"
	got, err = DecodePartitionWindow(w.AppendBinary(nil))
	require.NoError(t, err)
	require.Equal(t, "k\xff", got.Apps[0].Top[0].Key)
}

func TestPartitionWindowBinaryRejects(t *testing.T) {
	good := fullWindow().AppendBinary(nil)
	for n := range len(good) {
		_, err := DecodePartitionWindow(good[:n])
		require.Error(t, err, "truncated to %d of %d bytes", n, len(good))
	}
	_, err := DecodePartitionWindow(append(good, 0))
	require.ErrorContains(t, err, "1 bytes after the last app")

	v9 := append([]byte{}, good...)
	v9[1] = 9
	_, err = DecodePartitionWindow(v9)
	require.ErrorContains(t, err, "version 9")

	w := fullWindow()
	w.EndMs = w.StartMs
	_, err = DecodePartitionWindow(w.AppendBinary(nil))
	require.ErrorContains(t, err, "not after start")

	// A list length no input could hold is refused before allocating.
	// (id, topic, partition, partitions, start 0, end 1, offsets,
	// watermark, events, late, flags, then the apps' count)
	huge := []byte{WindowBinaryMagic, WindowVersion, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0}
	huge = append(huge, 0xff, 0xff, 0xff, 0xff, 0x0f)
	_, err = DecodePartitionWindow(huge)
	require.EqualError(t, err, "decode partition window: binary partition window truncated or malformed")
	_, err = DecodePartitionWindow(append(huge[:len(huge)-5], 1))
	require.NoError(t, err, "the same summary with no apps is fine")
}

// FuzzDecodePartitionWindow: DecodePartitionWindow never panics on either
// form, a summary it decodes survives the binary form unchanged, and one
// JSON can carry (UTF-8 strings, finite shares) decodes alike from both.
func FuzzDecodePartitionWindow(f *testing.F) {
	f.Add(fullWindow().AppendBinary(nil))
	f.Add(appendBinaryV1(v1Window()))
	js, err := fullWindow().AppendJSON(nil)
	require.NoError(f, err)
	f.Add(js)
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := DecodePartitionWindow(data)
		if err != nil {
			return
		}
		// Compared encoded: a NaN share is not equal to itself.
		enc := w.AppendBinary(nil)
		back, err := DecodePartitionWindow(enc)
		require.NoError(t, err)
		require.Equal(t, enc, back.AppendBinary(nil))
		js, err := w.AppendJSON(nil)
		if err != nil || !utf8.Valid(js) || bytes.Contains(js, []byte(`\ufffd`)) {
			return // a NaN or infinite share, or a string JSON would change
		}
		viaJSON, err := DecodePartitionWindow(js)
		require.NoError(t, err)
		require.Equal(t, back, viaJSON)
	})
}
