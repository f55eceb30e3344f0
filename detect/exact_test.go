package detect_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
)

// TestReportsExactThroughService: a keyed topic of four partitions, each
// holding about 2,000 keys of one app in one window (twice what a top-K
// of 1,024 tracks), read to its end by the whole service. The cluster
// report's top 100 is the exact answer of a map of every event (ties at
// the cut in any order) with true counts and figures, its top ten by
// bytes, reads and writes are exact, and it says it is exact.
func TestReportsExactThroughService(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		const parts = 4
		e := newEnv(t, seeds, parts)
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		type figures struct{ count, bytes, reads, writes uint64 }
		exact := map[string]*figures{}
		r := rand.New(rand.NewPCG(5, 5))
		var names []string
		for k := range 8000 {
			for range 7 + r.IntN(6) {
				names = append(names, fmt.Sprintf("flat:%d", k))
			}
		}
		r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		var recs []*kgo.Record
		for i, key := range names {
			ev := schemas.AccessEvent{TimeMs: base + int64(i)*900/int64(len(names)), Key: key, App: "a", Op: "GET",
				Bytes: int64(10 + r.IntN(2000))}
			if r.IntN(4) == 0 {
				ev.Op = "SET"
			}
			f := exact[key]
			if f == nil {
				f = &figures{}
				exact[key] = f
			}
			f.count++
			f.bytes += uint64(ev.Bytes)
			if ev.Op == "GET" {
				f.reads++
			} else {
				f.writes++
			}
			p := int32(sketch.Hash(key) % parts)
			recs = append(recs, &kgo.Record{Topic: e.events, Partition: p, Key: []byte(key), Value: schemas.AppendJSON(nil, &ev)})
		}
		produce(t, e.seeds, recs...)
		cfg := e.config(t)
		cfg.Pipeline.Rules[0].Rate = 1e6 // no key is hot: this is about the reports
		cfg.ExitAtEnd = true
		svc, err := detect.New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		require.NoError(t, svc.Run(ctx))

		var rep *schemas.WindowReport
		for _, rec := range readAll(t, e.seeds, e.reports) {
			x, err := schemas.DecodeWindowReport(rec.Value)
			require.NoError(t, err)
			if x.Scope == schemas.ScopeCluster && x.StartMs == base {
				rep = x
			}
		}
		require.NotNil(t, rep)
		require.EqualValues(t, len(names), rep.Events)
		require.True(t, rep.Keyed)
		require.False(t, rep.Partial)
		require.False(t, rep.Approximate, "every partition counted its window exactly")
		require.Len(t, rep.Top, 100)
		require.Equal(t, 100, rep.Guaranteed)

		counts := make([]uint64, 0, len(exact))
		for _, f := range exact {
			counts = append(counts, f.count)
		}
		slices.SortFunc(counts, func(a, b uint64) int { return cmp.Compare(b, a) })
		cut := counts[99]
		above := 0
		for _, c := range counts {
			if c > cut {
				above++
			}
		}
		listedAbove := 0
		for i, k := range rep.Top {
			f := exact[k.Key]
			require.NotNil(t, f, "%s listed, never produced", k.Key)
			require.Equal(t, figures{f.count, f.bytes, f.reads, f.writes}, figures{k.Count, k.Bytes, k.Reads, k.Writes}, "rank %d %s: true figures", i+1, k.Key)
			require.Zero(t, k.Error, k.Key)
			require.GreaterOrEqual(t, f.count, cut, "rank %d %s", i+1, k.Key)
			if f.count > cut {
				listedAbove++
			}
		}
		require.Equal(t, above, listedAbove, "every key with more than %d events is listed", cut)
		require.Equal(t, counts[100], rep.Floor, "the floor is the first true count left out")

		for _, l := range []struct {
			name string
			list []schemas.KeyCount
			of   func(*figures) uint64
			got  func(*schemas.KeyCount) uint64
		}{
			{"bytes", rep.TopBytes, func(f *figures) uint64 { return f.bytes }, func(k *schemas.KeyCount) uint64 { return k.Bytes }},
			{"reads", rep.TopReads, func(f *figures) uint64 { return f.reads }, func(k *schemas.KeyCount) uint64 { return k.Reads }},
			{"writes", rep.TopWrites, func(f *figures) uint64 { return f.writes }, func(k *schemas.KeyCount) uint64 { return k.Writes }},
		} {
			var want []uint64
			for _, f := range exact {
				want = append(want, l.of(f))
			}
			slices.SortFunc(want, func(a, b uint64) int { return cmp.Compare(b, a) })
			require.GreaterOrEqual(t, len(l.list), 10, l.name)
			for i, k := range l.list[:10] {
				require.Equal(t, want[i], l.got(&k), "top %s rank %d (%s)", l.name, i+1, k.Key)
				require.Equal(t, l.of(exact[k.Key]), l.got(&k), "%s: true %s", k.Key, l.name)
			}
		}
	})
}
