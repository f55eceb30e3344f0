package archive_test

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

	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
)

// benchEvents returns n access-log-like events of one app within one hour
// (so one file per segment): keys Zipf-distributed over a million, a
// thousand clients, sixteen nodes, event time advancing 1ms per 300 events.
func benchEvents(n int) []schemas.AccessEvent {
	rng := rand.New(rand.NewPCG(7, 11))
	zipf := rand.NewZipf(rng, 1.1, 1, 1_000_000)
	keys := make(map[uint64]string)
	clients := make([]string, 1000)
	for i := range clients {
		clients[i] = fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
	}
	nodes := make([]string, 16)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("redis-%02d", i)
	}
	ops := []string{"GET", "GET", "GET", "SET", "HGETALL", "DEL"}
	out := make([]schemas.AccessEvent, n)
	for i := range out {
		k := zipf.Uint64()
		key, ok := keys[k]
		if !ok {
			key = fmt.Sprintf("user:%d:profile", k)
			keys[k] = key
		}
		out[i] = schemas.AccessEvent{
			TimeMs: baseMs + 60_000 + int64(i/300) - int64(rng.IntN(3)), Key: key, App: "shop",
			Op: ops[rng.IntN(len(ops))], Bytes: int64(rng.IntN(4096)), Status: 200,
			Client: clients[rng.IntN(len(clients))], Node: nodes[k%16], LatencyUs: int64(rng.IntN(2000)),
		}
	}
	return out
}

const benchN = 1 << 20

// BenchmarkArchiveWrite appends a million events to one partition and
// flushes: buffering, sorting, encoding with zstd, fsync and rename, with
// default options (segments of 32 MiB).
func BenchmarkArchiveWrite(b *testing.B) {
	evs := benchEvents(benchN)
	for _, level := range []string{"fastest", "default", "better"} {
		b.Run("zstd="+level, func(b *testing.B) { benchWrite(b, evs, level) })
	}
}

func benchWrite(b *testing.B, evs []schemas.AccessEvent, level string) {
	b.ReportAllocs()
	b.ResetTimer()
	var bytes int64
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := b.TempDir()
		opts := archive.DefaultOptions()
		opts.Root = root
		opts.Zstd = level
		a, err := archive.Open(context.Background(), opts, nil, nil)
		require.NoError(b, err)
		w, err := a.Partition(context.Background(), testTopic, 0, 0)
		require.NoError(b, err)
		b.StartTimer()
		cpu0 := cpuTime()
		for j := range evs {
			if err := w.Append(int64(j), evs[j]); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, w.Flush(context.Background()))
		cpu += cpuTime() - cpu0
		b.StopTimer()
		require.NoError(b, a.Close())
		bytes = dirSize(b, root)
		b.StartTimer()
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(benchN)*float64(b.N)/cpu.Seconds(), "events/cpu-s")
	b.ReportMetric(float64(bytes)/benchN, "B/event")
}

func dirSize(b *testing.B, root string) int64 {
	var n int64
	require.NoError(b, filepath.Walk(filepath.Join(root, "kind=events"), func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return err
	}))
	return n
}

// BenchmarkArchiveRead reads back a million events written as one file:
// keyheat's replay reader (EventReader, events in replay order) next to
// parquet-go's own GenericReader on the same file.
func BenchmarkArchiveRead(b *testing.B) {
	root := b.TempDir()
	opts := archive.DefaultOptions()
	opts.Root = root
	opts.SegmentBytes = 1 << 40 // one segment, so one file
	a, err := archive.Open(context.Background(), opts, nil, nil)
	require.NoError(b, err)
	w, err := a.Partition(context.Background(), testTopic, 0, 0)
	require.NoError(b, err)
	evs := benchEvents(benchN)
	for j := range evs {
		require.NoError(b, w.Append(int64(j), evs[j]))
	}
	require.NoError(b, a.Close())
	var file string
	require.NoError(b, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			require.Empty(b, file, "one file")
			file = p
		}
		return err
	}))

	b.Run("keyheat", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]schemas.EventRow, 4096)
		cpu0 := cpuTime()
		for i := 0; i < b.N; i++ {
			r, err := archive.OpenEvents(context.Background(), root, archive.Query{}, nil)
			require.NoError(b, err)
			n := 0
			for {
				k, err := r.Read(buf)
				n += k
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(b, err)
			}
			require.NoError(b, r.Close())
			require.Equal(b, benchN, n)
		}
		b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(benchN)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
	})
	b.Run("parquet-go", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]schemas.EventRow, 4096)
		cpu0 := cpuTime()
		for i := 0; i < b.N; i++ {
			f, err := os.Open(file)
			require.NoError(b, err)
			st, err := f.Stat()
			require.NoError(b, err)
			pf, err := parquet.OpenFile(f, st.Size())
			require.NoError(b, err)
			r := parquet.NewGenericReader[schemas.EventRow](pf)
			n := 0
			for {
				k, err := r.Read(buf)
				n += k
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(b, err)
			}
			require.NoError(b, r.Close())
			require.NoError(b, f.Close())
			require.Equal(b, benchN, n)
		}
		b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64(benchN)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
	})
}

// cpuTime is the CPU time the process has used, user and system. On a
// machine shared with other work, events per CPU-second says what one core
// sustains better than wall-clock rates do; with -cpu 1 the process runs Go
// code on one core (the collector included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkArchiveReplayMerge replays eight partitions whose events
// interleave in time (a million events in all), so every event goes
// through the merge heap: what a replay of a real topic costs.
func BenchmarkArchiveReplayMerge(b *testing.B) {
	root := b.TempDir()
	opts := archive.DefaultOptions()
	opts.Root = root
	a, err := archive.Open(context.Background(), opts, nil, nil)
	require.NoError(b, err)
	evs := benchEvents(benchN)
	const parts = 8
	for p := range parts {
		w, err := a.Partition(context.Background(), testTopic, int32(p), 0)
		require.NoError(b, err)
		for j := p; j < len(evs); j += parts {
			require.NoError(b, w.Append(int64(j/parts), evs[j]))
		}
	}
	require.NoError(b, a.Close())
	b.ReportAllocs()
	b.ResetTimer()
	buf := make([]schemas.EventRow, 4096)
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		r, err := archive.OpenEvents(context.Background(), root, archive.Query{}, nil)
		require.NoError(b, err)
		n := 0
		for {
			k, err := r.Read(buf)
			n += k
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(b, err)
		}
		require.NoError(b, r.Close())
		require.Equal(b, benchN, n)
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(benchN)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "events/cpu-s")
}
