package detect_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestTopNAgainstExactCounts: the cluster report's top keys, merged from
// four keyed partitions, are the exact heaviest keys of the window with
// their exact counts, as a map of every event counts them; every listed
// count bounds the true one as its error says.
func TestTopNAgainstExactCounts(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 4)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		exact := map[string]uint64{}
		var recs []*kgo.Record
		const n = 40_000
		for i := range n {
			// Zipf-like: key r with weight ~1/r over 5,000 keys, more
			// than a window's top-K tracks per app (1024).
			r := 1 + (i*7919)%5000
			if i%2 == 0 {
				r = 1 + (i/2*31)%40
			}
			key := fmt.Sprintf("key:%d", r)
			exact[key]++
			p := int32(r % 4)
			ev := accessEvent(key, base+int64(i)*900/n)
			recs = append(recs, &kgo.Record{Topic: e.events, Partition: p, Key: []byte(key), Value: schemas.AppendJSON(nil, &ev)})
		}
		recs = append(recs, event(e.events, 0, "end", base+1500)) // closes the window on partition 0
		produce(t, e.seeds, recs...)
		cfg := e.config(t)
		cfg.ExitAtEnd = true
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		require.NoError(t, svc.Run(ctx))

		var rep *schemas.WindowReport
		for _, r := range readAll(t, e.seeds, e.reports) {
			x, err := schemas.DecodeWindowReport(r.Value)
			require.NoError(t, err)
			if x.Scope == schemas.ScopeCluster && x.StartMs == base {
				rep = x
			}
		}
		require.NotNil(t, rep)
		require.EqualValues(t, n, rep.Events)
		require.True(t, rep.Keyed)
		type kc struct {
			key string
			n   uint64
		}
		var want []kc
		for k, c := range exact {
			want = append(want, kc{k, c})
		}
		slices.SortFunc(want, func(a, b kc) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.key, b.key)) })
		require.GreaterOrEqual(t, len(rep.Top), 40)
		for i, k := range rep.Top {
			require.LessOrEqual(t, k.Count-k.Error, exact[k.Key], "%s: count %d error %d, true %d", k.Key, k.Count, k.Error, exact[k.Key])
			require.GreaterOrEqual(t, k.Count, exact[k.Key], "%s: a count never undercounts", k.Key)
			if i < 40 {
				require.Equal(t, want[i].key, k.Key, "rank %d", i+1)
				require.Equal(t, want[i].n, k.Count, "%s exact", k.Key)
				require.Zero(t, k.Error, "%s exact", k.Key)
			}
		}
	})
}
