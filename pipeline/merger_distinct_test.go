package pipeline

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// listedAsLibrary re-encodes a version 2 (listed registers) Cardinality
// encoding as version 1 (the library's dense registers): the same
// estimate, other bytes.
func listedAsLibrary(t *testing.T, enc []byte) []byte {
	t.Helper()
	require.Equal(t, byte(2), enc[4], "a listed encoding")
	p := enc[5]
	body := enc[6 : len(enc)-4]
	nz, n := binary.Uvarint(body)
	body = body[n:]
	m := 1 << p
	out := append([]byte("KHHL"), 1, 2, p, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(m))
	regs := make([]byte, m)
	i := -1
	for range nz {
		gap, n := binary.Uvarint(body)
		i += int(gap)
		regs[i] = body[n]
		body = body[n+1:]
	}
	out = append(out, regs...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli)))
}

// TestMergerDuplicateDistinctEncodings: a summary re-sent with its distinct
// sketch encoded in the other version is a duplicate (the same estimate),
// one with another estimate a conflict, as when the merger compared
// decoded sketches.
func TestMergerDuplicateDistinctEncodings(t *testing.T) {
	distinct := func(keys ...string) []byte {
		c, err := sketch.NewCardinality(sketch.CardinalityConfig{Precision: 12})
		require.NoError(t, err)
		for _, k := range keys {
			c.Add(k)
		}
		enc, err := c.MarshalBinary()
		require.NoError(t, err)
		return enc
	}
	with := func(enc []byte) *schemas.PartitionWindow {
		w := mergeTestWindow("t", 0, 2, 0, 5)
		w.Apps[0].Distinct = enc
		return w
	}
	m := newTestMerger(t, nil)
	listed := distinct("a", "b", "c")
	require.NoError(t, m.Add(with(listed), 0, 0))
	require.NoError(t, m.Add(with(listedAsLibrary(t, listed)), 1, 0))
	require.Equal(t, int64(1), m.Stats().Duplicates.Load(), "the same estimate in version 1")
	require.Equal(t, int64(0), m.Stats().Conflicts.Load())
	require.NoError(t, m.Add(with(listedAsLibrary(t, distinct("a", "b", "d"))), 2, 0))
	require.Equal(t, int64(1), m.Stats().Conflicts.Load(), "another estimate")

	require.NoError(t, m.Add(mergeTestWindow("t", 1, 2, 0, 1), 3, 0))
	got := m.Ready(nil)
	require.Len(t, got, 1)
	require.Equal(t, uint64(3), got[0].Reports[0].Distinct)
}
