package ingest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// BenchmarkGenKFake measures ingest gen into kfake against a baseline of
// raw franz-go producing records of the same size to the same cluster in
// the same run. Both are bound by kfake on this machine; compare ratios.
func BenchmarkGenKFake(b *testing.B) {
	const n = 200_000
	seeds := testenv.KFake(b)
	events := testenv.NewTopic(b, seeds, 6)
	dlq := testenv.NewTopic(b, seeds, 1)
	b.Run("raw_franz_go", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond),
			kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.MaxBufferedRecords(100_000))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		val := schemas.AppendBinary(nil, &schemas.AccessEvent{TimeMs: 1742220131000, Key: "key:12345", App: "gen", Op: "GET", Bytes: 512, Client: "gen"})
		for b.Loop() {
			for i := range n {
				cl.Produce(context.Background(), &kgo.Record{Topic: events, Key: []byte("key:12345")[:4+i%5], Value: val}, nil)
			}
			if err := cl.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	})
	// The same records as ingest gen writes, keyheat-id header included,
	// built before the clock starts: what franz-go and kfake cost for
	// these bytes, so the ratio measures only gen's own work.
	b.Run("raw_franz_go_same_bytes", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(5*time.Millisecond),
			kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.MaxBufferedRecords(100_000))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		recs := make([]kgo.Record, n)
		for b.Loop() {
			b.StopTimer()
			for i := range recs {
				key := "key:" + strconv.Itoa(i%100_000)
				val := schemas.AppendBinary(nil, &schemas.AccessEvent{TimeMs: 1742220131000 + int64(i), Key: key, App: "gen", Op: "GET", Bytes: 100 + int64(i%900), Client: "gen"})
				recs[i] = kgo.Record{Topic: events, Key: []byte(key), Value: val,
					Headers: []kgo.RecordHeader{{Key: schemas.HeaderRecordID, Value: []byte(schemas.RecordID{Kind: schemas.IDGen, Seed: 1, Offset: int64(i)}.String())}}}
			}
			b.StartTimer()
			for i := range recs {
				cl.Produce(context.Background(), &recs[i], nil)
			}
			if err := cl.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("ingest_gen", func(b *testing.B) {
		p, err := NewProducer(ProducerConfig{ProducerOptions: benchProducerOptions(), ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
			Topic: events, DLQTopic: dlq, Codec: schemas.Binary})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		// Built once, as one ingest gen process does; each loop replays
		// the same seed.
		g, err := NewGen(GenConfig{Keys: 100_000, S: 1.1, Count: n, Seed: 1,
			Hot: []HotKey{{Key: "product:42", For: time.Hour, Share: 0.05}}}, p, nil)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := g.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkTailKFake follows a 2M-line nginx combined file from its start
// into kfake, end to end: read, parse, encode, produce, and commit, each
// commit a Kafka transaction with the file's position; a line counts once
// its transaction committed. kfake runs in the same process and shares
// the cores: a floor, not the tailer's ceiling.
func BenchmarkTailKFake(b *testing.B) { benchTail(b, testenv.KFake(b)) }

// BenchmarkTailKafka is BenchmarkTailKFake into the real broker named by
// KEYHEAT_TEST_KAFKA.
func BenchmarkTailKafka(b *testing.B) { benchTail(b, testenv.KafkaSeeds(b)) }

func benchTail(b *testing.B, seeds []string) {
	const n = 2_000_000
	path := filepath.Join(b.TempDir(), "access.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		fmt.Fprintf(w, `10.0.%d.%d - - [17/Mar/2025:14:02:11 +0000] "GET /product/%d?ref=home HTTP/1.1" 200 %d "-" "Mozilla/5.0"`+"\n",
			i%200, i%250, i%50_000, 100+i%9000)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	events := testenv.NewTopic(b, seeds, 6)
	dlq := testenv.NewTopic(b, seeds, 1)
	positions := testenv.NewTopicWithConfigs(b, seeds, 1, PositionsTopicConfigs())
	parser, err := logparse.New(logparse.Config{Format: "combined", Combined: logparse.CombinedConfig{Key: "path_noquery"}})
	if err != nil {
		b.Fatal(err)
	}
	loop := 0
	for b.Loop() {
		// A tail id of its own per loop, so each reads the file from its
		// start; the default commit interval, so every loop commits
		// several transactions as the real command does.
		loop++
		opts := TailOptions{TailID: testenv.UniqueName(b, fmt.Sprintf("bench-%d", loop)), PositionsTopic: positions}
		p, err := NewProducer(ProducerConfig{ProducerOptions: benchProducerOptions(), ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)},
			Topic: events, DLQTopic: dlq, Codec: schemas.Binary, TransactionalID: opts.TransactionalID(), PositionsTopic: positions})
		if err != nil {
			b.Fatal(err)
		}
		pl, err := NewLineSender(LineSenderConfig{Parser: parser, Producer: p})
		if err != nil {
			b.Fatal(err)
		}
		tl, err := NewTailer(TailConfig{TailOptions: opts, Paths: []string{path}, FromStart: true}, pl)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tl.Run(ctx) }()
		for pl.Stats().Events.Load()+pl.Stats().DLQ.Load() < n {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		if got := pl.Stats().Events.Load(); got != n {
			b.Fatalf("%d events, want %d", got, n)
		}
		p.Close()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "lines/s")
}

// benchProducerOptions are the defaults ingest runs with, lz4 instead of
// zstd, as the raw franz-go baselines use.
func benchProducerOptions() ProducerOptions {
	o := DefaultProducerOptions()
	o.Compression = "lz4"
	return o
}
