package ingest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
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
					Headers: []kgo.RecordHeader{{Key: HeaderID, Value: []byte("gen:1:" + strconv.Itoa(i))}}}
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
		p, err := NewProducer(ProducerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: events, DLQTopic: dlq,
			Codec: schemas.Binary, Compression: "lz4"})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		// Built once, as one ingest gen process does; each loop replays
		// the same seed.
		g, err := NewGen(GenConfig{Keys: 100_000, Count: n, Seed: 1,
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
