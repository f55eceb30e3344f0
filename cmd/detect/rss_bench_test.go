package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// BenchmarkRSS measures the peak resident memory of a detect process (the
// built binary, a batch run) over a minute of event time at 10M events per
// minute, once with every key distinct (10M distinct keys a minute) and
// once with 1,000 keys: memory is bounded by the configuration, not by
// the number of distinct keys. It reports the peak RSS in MiB and the
// pipeline's MemoryBound per partition for comparison (4 partitions).
// Needs the real Kafka broker (KEYHEAT_TEST_KAFKA): ten million records
// held by an in-process kfake would share the machine's memory.
func BenchmarkRSS(b *testing.B) {
	seeds := testenv.KafkaSeeds(b)
	const n = 10_000_000
	for _, distinct := range []int{1_000, n} {
		b.Run(fmt.Sprintf("events=%d/distinct=%d", n, distinct), func(b *testing.B) {
			b.StopTimer()
			events := testenv.NewTopic(b, seeds, 4)
			fillKeys(b, seeds, events, n, distinct)
			b.StartTimer()
			for range b.N {
				e := newRunEnv(b, seeds, events)
				p := start(b, nil, append([]string{"run", "--exit-at-end", "--print=json"}, e.flags()...)...)
				peak := watchRSS(b, p)
				b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
				var counted uint64
				for _, line := range p.Stdout.Match(regexpOf(`"scope":"cluster"`)) {
					r, err := schemas.DecodeWindowReport([]byte(line))
					require.NoError(b, err)
					counted += r.Events
				}
				require.EqualValues(b, n, counted, "every event counted")
			}
			b.ReportMetric(float64(pipeline.DefaultOptions().MemoryBound())/(1<<20), "bound-MiB/partition")
		})
	}
}

// fillKeys writes n binary events over 60 s of event time, key i%distinct.
func fillKeys(b *testing.B, seeds []string, topic string, n, distinct int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(10*time.Millisecond), kgo.MaxBufferedRecords(100_000))
	require.NoError(b, err)
	defer cl.Close()
	base := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		key := "key:" + strconv.Itoa(i%distinct)
		e := schemas.AccessEvent{TimeMs: base + int64(i)*60_000/int64(n), Key: key, App: "app", Op: "GET", Bytes: 100}
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: schemas.AppendBinary(nil, &e)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
				wg.Done()
			})
	}
	wg.Wait()
	require.NoError(b, firstErr)
}

// watchRSS samples the process's resident memory every 100 ms until it
// exits (0) and returns the peak, in bytes.
func watchRSS(b *testing.B, p *testenv.Process) int64 {
	var peak int64
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.Done():
			require.NoError(b, p.Err())
			return peak
		case <-t.C:
			peak = max(peak, rss(p.Pid()))
		}
	}
}

func rss(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
