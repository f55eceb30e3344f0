package detect_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// replayBenchN events over replayBenchParts partitions, a Zipf(1.1) key
// mix over a million keys at 300 events per millisecond of event time:
// about 7 s of a busy cluster, seven 1 s windows.
const (
	replayBenchN     = 2 << 20
	replayBenchParts = 8
)

// replayBenchArchive writes the benchmark's archive, as detect would: each
// key on one partition (keyed by access key), offsets in order.
func replayBenchArchive(b *testing.B) (root string, files []string) {
	b.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	zipf := rand.NewZipf(rng, 1.1, 1, 1_000_000)
	keys := map[uint64]string{}
	ops := []string{"GET", "GET", "GET", "SET", "HGETALL", "DEL"}
	apps := []string{"shop", "search", "ads"}
	opts := archive.DefaultOptions()
	opts.Root = b.TempDir()
	a, err := archive.Open(context.Background(), opts, nil, nil)
	require.NoError(b, err)
	ws := make([]*archive.PartitionWriter, replayBenchParts)
	next := make([]int64, replayBenchParts)
	base := int64(1_767_225_600_000)
	for i := range replayBenchN {
		k := zipf.Uint64()
		key, ok := keys[k]
		if !ok {
			key = fmt.Sprintf("user:%d:profile", k)
			keys[k] = key
		}
		p := int(k % replayBenchParts)
		if ws[p] == nil {
			ws[p], err = a.Partition(context.Background(), "keyheat.events", int32(p), 0)
			require.NoError(b, err)
		}
		e := schemas.AccessEvent{TimeMs: base + int64(i/300), Key: key, App: apps[k%3], Op: ops[rng.IntN(len(ops))],
			Bytes: int64(rng.IntN(4096)), Status: 200, Node: fmt.Sprintf("redis-%02d", k%16), LatencyUs: int64(rng.IntN(2000))}
		require.NoError(b, ws[p].Append(next[p], e))
		next[p]++
	}
	require.NoError(b, a.Close())
	require.NoError(b, filepath.WalkDir(filepath.Join(opts.Root, "kind=events"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			files = append(files, p)
		}
		return err
	}))
	return opts.Root, files
}

func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportRate(b *testing.B, events int64, cpu time.Duration) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(events)/cpu.Seconds(), "events/cpu-s")
}

type discard struct{ reports, hot int }

func (d *discard) HotKey(*schemas.HotKeyEvent) error  { d.hot++; return nil }
func (d *discard) Report(*schemas.WindowReport) error { d.reports++; return nil }

// BenchmarkReplay: the same archive files read three ways in one run:
// parquet-go's generic row reader (every row of every file, no order),
// keyheat's EventReader (merged in event-time order), and EventReader
// feeding detect.Replay (cores and merger, the default rule). Run with
// -cpu=1 for the one-core figures.
func BenchmarkReplay(b *testing.B) {
	root, files := replayBenchArchive(b)
	b.Run("parquet-go", func(b *testing.B) {
		b.ReportAllocs()
		rows := make([]schemas.EventRow, 4096)
		var n int64
		cpu0 := benchCPU()
		for range b.N {
			for _, name := range files {
				f, err := os.Open(name)
				require.NoError(b, err)
				st, err := f.Stat()
				require.NoError(b, err)
				pf, err := parquet.OpenFile(f, st.Size())
				require.NoError(b, err)
				r := parquet.NewGenericReader[schemas.EventRow](pf)
				for {
					k, err := r.Read(rows)
					n += int64(k)
					if errors.Is(err, io.EOF) {
						break
					}
					require.NoError(b, err)
				}
				require.NoError(b, r.Close())
				require.NoError(b, f.Close())
			}
		}
		require.EqualValues(b, replayBenchN*b.N, n)
		reportRate(b, n, benchCPU()-cpu0)
	})
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		rows := make([]schemas.EventRow, 4096)
		var n int64
		cpu0 := benchCPU()
		for range b.N {
			r, err := archive.OpenEvents(context.Background(), root, archive.Query{}, nil)
			require.NoError(b, err)
			for {
				k, err := r.Read(rows)
				n += int64(k)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(b, err)
			}
			require.NoError(b, r.Close())
		}
		require.EqualValues(b, replayBenchN*b.N, n)
		reportRate(b, n, benchCPU()-cpu0)
	})
	b.Run("read+detect", func(b *testing.B) {
		b.ReportAllocs()
		cfg := detect.ReplayConfig{Pipeline: pipeline.DefaultOptions(),
			Merge: pipeline.MergerConfig{MergerOptions: pipeline.DefaultMergerOptions(), Window: time.Second}}
		var n int64
		var d discard
		cpu0 := benchCPU()
		for range b.N {
			r, err := archive.OpenEvents(context.Background(), root, archive.Query{}, nil)
			require.NoError(b, err)
			cfg.Partitions = r.Partitions()
			st, err := detect.Replay(context.Background(), r, cfg, &d)
			require.NoError(b, err)
			require.NoError(b, r.Close())
			n += st.Events
		}
		require.EqualValues(b, replayBenchN*b.N, n)
		require.NotZero(b, d.reports)
		reportRate(b, n, benchCPU()-cpu0)
	})
}
