package parquet_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
	archive "github.com/keyheat/keyheat/sink/parquet"
)

// TestRoundTripExact archives three partitions and replays them: every
// event comes back exactly, in (time, topic, partition, offset) order.
// Sparse times (seconds apart) sort buckets with pdqsort, dense ones (many
// events per millisecond) with the counting sort; both must hold.
func TestRoundTripExact(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stepMs int64
	}{{"sparse times", 3_000}, {"dense times", 1}, {"equal times", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			a := openArchive(t, testOptions(root))
			apps := []string{"shop", "search", "", "a/b c%"}
			var want []schemas.EventRow
			for p := int32(0); p < 3; p++ {
				ins := genEvents(p, 3000, apps, tc.stepMs)
				w, err := a.Partition(context.Background(), testTopic, p, 0)
				require.NoError(t, err, "open partition %d", p)
				end := ins[len(ins)-1].offset + 1
				appendAll(t, w, ins, end)
				require.NoError(t, w.Flush(context.Background()), "flush partition %d", p)
				require.Equal(t, end, w.Durable(), "partition %d durable after flush", p)
				for _, in := range ins {
					want = append(want, rowOf(testTopic, in))
				}
			}
			require.NoError(t, a.Close(), "close")
			require.NoError(t, a.Close(), "second close")

			got := readAll(t, root, archive.Query{})
			sortRows(want)
			require.Equal(t, len(want), len(got), "rows read back")
			require.Equal(t, want, got, "replay yields every event exactly, in (time, topic, partition, offset) order")
		})
	}
}
