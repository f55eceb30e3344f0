package detect_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// BenchmarkAlertLatency measures, live, the delay from a hot key's onset
// (the event time of the event that crossed its rule's rate) to the
// moment detect published it (DetectedMs), with background traffic at a
// given rate: ingest's generator producing Zipf(0.8) traffic over a
// million keys to an in-process kfake broker (4 partitions) while the
// service runs; 200 planted keys turn hot, a new one every 100 ms, each
// at 2,000 events/s for a second against the default rule's 1,000 (about
// ten are hot at any moment). The delay includes producing,
// fetching, detection and publishing. It reports p50 and p99 in ms and
// the background rate reached.
//
// With a rate, the generator stamps event i with start + i/rate and paces
// itself to the wall clock (at most 1024 events ahead); if it cannot keep
// the rate, its event times fall behind the wall clock and the delay
// grows by that lag, which is the generator's, not detect's. rate=max
// produces as fast as it can and stamps the wall clock, so the delay is
// detect's whatever the rate reached.
func BenchmarkAlertLatency(b *testing.B) {
	for _, rate := range []float64{50_000, 100_000, 0} {
		name := fmt.Sprintf("background=%.0f/s", rate)
		if rate == 0 {
			name = "background=max"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				p50, p99, achieved, n := alertLatency(b, rate, true)
				b.ReportMetric(p50, "p50-ms")
				b.ReportMetric(p99, "p99-ms")
				b.ReportMetric(achieved, "events/s")
				b.ReportMetric(float64(n), "alerts")
			}
		})
	}
}

// BenchmarkAlertLatencyUnkeyed runs BenchmarkAlertLatency's measure at
// 100,000 events/s twice in one run: with the topic read as keyed (each
// partition alerts by itself) and as not keyed (detect.keyed false: the
// partitions send candidates, the merger's cluster stage alerts), so the
// two delays are measured on the same machine under the same load.
// Not keyed, the records go round-robin over the partitions, as a log
// shipper's do: each planted key's 2,000/s are about 500/s on each of the
// four, under the rule's 1,000/s everywhere, and only the sum crosses it.
func BenchmarkAlertLatencyUnkeyed(b *testing.B) {
	for _, keyed := range []bool{true, false} {
		b.Run(fmt.Sprintf("keyed=%v", keyed), func(b *testing.B) {
			for range b.N {
				p50, p99, achieved, n := alertLatency(b, 100_000, keyed)
				b.ReportMetric(p50, "p50-ms")
				b.ReportMetric(p99, "p99-ms")
				b.ReportMetric(achieved, "events/s")
				b.ReportMetric(float64(n), "alerts")
			}
		})
	}
}

func alertLatency(b *testing.B, rate float64, keyed bool) (p50, p99, achieved float64, alerts int) {
	const planted, every, each = 200, 100 * time.Millisecond, time.Second
	seeds := benchSeeds(b)
	sfx := ""
	if !keyed {
		sfx = "-u"
	}
	e := &env{seeds: seeds, parts: 4, events: "lat-events" + sfx, dlq: "lat-dlq" + sfx, hotkeys: "lat-hot" + sfx, windows: "lat-win" + sfx,
		reports: "lat-rep" + sfx, progress: "lat-prog" + sfx, group: "lat-g" + sfx, mergeGroup: "lat-m" + sfx}
	// The service never creates an events topic (a typo would be read,
	// empty, for ever).
	e.events = testenv.NewTopic(b, seeds, e.parts)
	cfg := e.config(nil)
	if !keyed {
		cfg.Keyed = detect.KeyedFalse
	}
	cfg.Pipeline = pipeline.DefaultOptions()
	cfg.Merge.Lateness = cfg.Pipeline.Lateness
	pr, pw := io.Pipe()
	cfg.Print, cfg.PrintFormat = pw, detect.PrintJSON
	svc, err := detect.New(cfg)
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var mu sync.Mutex
	var delays []float64
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if !strings.Contains(sc.Text(), `"type":"hot"`) {
				continue
			}
			h, err := schemas.DecodeHotKeyEvent(sc.Bytes())
			if err == nil && strings.HasPrefix(h.Key, "planted:") {
				mu.Lock()
				delays = append(delays, float64(h.DetectedMs-h.OnsetMs))
				mu.Unlock()
			}
		}
	}()
	testenv.EventuallyExplained(b, "the service ready", 0, func() (bool, string) {
		if err := svc.Ready(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	copts := []kgo.Opt{kgo.SeedBrokers(seeds...)}
	if !keyed {
		copts = append(copts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	}
	prod, err := ingest.NewProducer(ingest.ProducerConfig{ProducerOptions: ingest.DefaultProducerOptions(),
		ClientOpts: copts, Topic: e.events, DLQTopic: e.dlq, Codec: schemas.Binary})
	require.NoError(b, err)
	defer prod.Close()
	gc := ingest.GenConfig{Keys: 1_000_000, S: 0.8, Rate: rate, Duration: planted*every + each + 2*time.Second, Seed: 1, App: "bench"}
	share := 0.01 // rate=max: about 2,000/s at the 200k/s this reaches on two cores
	if rate > 0 {
		share = 2000 / rate
	}
	for i := range planted {
		gc.Hot = append(gc.Hot, ingest.HotKey{Key: fmt.Sprintf("planted:%d", i), Start: time.Second + time.Duration(i)*every, For: each, Share: share})
	}
	stats := ingest.NewStats(nil)
	gen, err := ingest.NewGen(gc, prod, stats)
	require.NoError(b, err)
	t0 := time.Now()
	_, err = gen.Run(ctx)
	require.NoError(b, err)
	achieved = float64(stats.Events.Load()) / time.Since(t0).Seconds()
	time.Sleep(2 * time.Second) // the last alerts
	cancel()
	require.NoError(b, <-done)
	require.NoError(b, pw.Close())
	<-read
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(b, delays, "no planted key alerted")
	slices.Sort(delays)
	q := func(p float64) float64 { return delays[min(len(delays)-1, int(p*float64(len(delays))))] }
	return q(0.5), q(0.99), achieved, len(delays)
}
