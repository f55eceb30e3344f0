package schemas

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// appendBinaryV1 is the binary form version 1 had, as detect wrote it
// before exact counting: no approximate flags, no rankings by reads,
// writes or latency, no key count flags.
func appendBinaryV1(w *PartitionWindow) []byte {
	dst := []byte{WindowBinaryMagic, 1}
	dst = appendString(dst, w.ID)
	dst = appendString(dst, w.Topic)
	for _, v := range [...]int64{int64(w.Partition), int64(w.Partitions), w.StartMs, w.EndMs, w.FirstOffset, w.LastOffset, w.WatermarkMs} {
		dst = binary.AppendVarint(dst, v)
	}
	dst = binary.AppendUvarint(dst, w.Events)
	dst = binary.AppendUvarint(dst, w.Late)
	var flags byte
	if w.Keyed {
		flags |= 1
	}
	if w.Final {
		flags |= 2
	}
	dst = append(dst, flags)
	dst = appendLen(dst, w.Apps == nil, len(w.Apps))
	keyCounts := func(dst []byte, kcs []KeyCount, keepNil bool) []byte {
		if keepNil {
			dst = appendLen(dst, kcs == nil, len(kcs))
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(kcs)))
		}
		for _, k := range kcs {
			dst = appendString(dst, k.App)
			dst = appendString(dst, k.Key)
			for _, v := range [...]uint64{k.Count, k.Error, k.Bytes, k.Reads, k.Writes, k.LatencyUs, k.BytesError} {
				dst = binary.AppendUvarint(dst, v)
			}
			dst = binary.AppendVarint(dst, int64(k.Partition))
			dst = binary.AppendUvarint(dst, math.Float64bits(k.Share))
		}
		return dst
	}
	for _, a := range w.Apps {
		dst = appendString(dst, a.App)
		for _, v := range [...]uint64{a.Events, a.Bytes, a.Reads, a.Writes, a.LatencyUs, a.Floor} {
			dst = binary.AppendUvarint(dst, v)
		}
		dst = keyCounts(dst, a.Top, true)
		dst = keyCounts(dst, a.Big, false)
		dst = appendBytes(dst, a.Distinct)
		dst = binary.AppendUvarint(dst, uint64(len(a.Slots)))
		prev := int64(0)
		for _, s := range a.Slots {
			dst = binary.AppendVarint(dst, int64(s.Slot)-prev)
			dst = binary.AppendUvarint(dst, s.Events)
			prev = int64(s.Slot)
		}
		dst = appendBytes(dst, a.Sketch)
	}
	return dst
}

// v1Window is a version 1 summary: app "full" whose top-K filled (Floor
// 4), with a big key in its Top exactly, one in its Top with an error and
// one not in its Top; app "small" whose top-K listed every key (Floor 0).
func v1Window() *PartitionWindow {
	return &PartitionWindow{Version: 1, ID: PartitionWindowID("t", 0, 0), Topic: "t", Partitions: 1,
		StartMs: 0, EndMs: 1000, FirstOffset: 0, LastOffset: 29, Events: 30, Keyed: true,
		Apps: []AppWindow{
			{App: "full", Events: 25, Bytes: 2500, Reads: 25, Floor: 4,
				Top: []KeyCount{
					{App: "full", Key: "a", Count: 9, Bytes: 900, Reads: 9},
					{App: "full", Key: "b", Count: 7, Error: 3, Bytes: 400, Reads: 4},
				},
				Big: []KeyCount{
					// v1: Count and Reads over the events with bytes since
					// tracked; Bytes an upper bound with BytesError.
					{App: "full", Key: "a", Count: 8, Bytes: 950, BytesError: 100, Reads: 8},
					{App: "full", Key: "b", Count: 4, Bytes: 700, BytesError: 300, Reads: 4},
					{App: "full", Key: "c", Count: 2, Bytes: 600, BytesError: 500, Reads: 2},
				}},
			{App: "small", Events: 5, Bytes: 50, Reads: 5, Top: []KeyCount{{App: "small", Key: "s", Count: 5, Bytes: 50, Reads: 5}}},
		}}
}

// A version 1 summary, in either form, decodes as version 2 saying what
// it knew: lists approximate where the top-K had filled, big keys with the
// count bounds version 2 gives every list.
func TestPartitionWindowReadsVersion1(t *testing.T) {
	js, err := json.Marshal(v1Window())
	require.NoError(t, err)
	for name, src := range map[string][]byte{"binary": appendBinaryV1(v1Window()), "json": js} {
		t.Run(name, func(t *testing.T) {
			w, err := DecodePartitionWindow(src)
			require.NoError(t, err)
			require.Equal(t, WindowVersion, w.Version, "read as the current version")
			require.True(t, w.Approximate)
			full, small := w.Apps[0], w.Apps[1]
			require.True(t, full.Approximate, "its top-K filled: Floor 4")
			require.False(t, small.Approximate, "its top-K listed every key")
			require.Equal(t, []KeyCount{
				{App: "full", Key: "a", Count: 9, Bytes: 900, Reads: 9},
				{App: "full", Key: "b", Count: 7, Error: 3, Bytes: 700, BytesError: 300, Reads: 4},
				{App: "full", Key: "c", Count: 4, Error: 2, Bytes: 600, BytesError: 500, Reads: 2},
			}, full.Big, "a: its exact Top entry; b: its Top bounds; c: at least 2, at most Floor")
			// Read again through the current binary form: the same.
			again, err := DecodePartitionWindow(w.AppendBinary(nil))
			require.NoError(t, err)
			require.Equal(t, w, again)
		})
	}
}

// Flags this version does not know are refused, not ignored.
func TestPartitionWindowUnknownFlags(t *testing.T) {
	v1 := appendBinaryV1(&PartitionWindow{Version: 1, StartMs: 0, EndMs: 1})
	v1[len(v1)-2] = 4 // the window's flags: approximate, unknown to version 1
	_, err := DecodePartitionWindow(v1)
	require.Error(t, err)

	w := &PartitionWindow{Version: WindowVersion, StartMs: 0, EndMs: 1, Apps: []AppWindow{{App: "a", Top: []KeyCount{{Key: "k"}}}}}
	good := w.AppendBinary(nil)
	_, err = DecodePartitionWindow(good)
	require.NoError(t, err)
	// The app's flags follow its name ("a") and six uvarints; the key
	// count's flags end the top list.
	app := 2 + 1 + 1 + 7 + 2 + 1 + 1 + 1 + 1 + 6
	for name, at := range map[string]int{"app": app, "key count": app + 1 + 1 + 1 + 1 + 1 + 7 + 1 + 1} {
		bad := append([]byte{}, good...)
		require.Zero(t, bad[at], name)
		bad[at] = 2
		_, err := DecodePartitionWindow(bad)
		require.Error(t, err, name)
	}
}
