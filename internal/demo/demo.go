package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/topics"
	"github.com/keyheat/keyheat/schemas"
)

// Options are the demo's own settings: where its broker listens and the
// traffic it makes.
type Options struct {
	// Port of the embedded broker on 127.0.0.1; 0 picks a free one.
	Port int
	// Rate is the events per second of the traffic; its event times
	// follow it. It must be positive.
	Rate float64
	// Keys is the number of distinct background keys, Zipf their
	// exponent (0: uniform).
	Keys int
	Zipf float64
	// Duration stops the traffic after this long; 0 runs until stopped.
	Duration time.Duration
	// Hot are the planted keys, in ingest.ParseHotKey's form
	// ("key=product:42,start=5s,for=20s,share=20%"); none plants
	// product:42 from 5 s to 25 s (20 %) and cart:7 from 35 s to 50 s
	// (15 %).
	Hot []string
}

// defaultHot is what Options.Hot plants when empty.
var defaultHot = []string{"key=product:42,start=5s,for=20s,share=20%", "key=cart:7,start=35s,for=15s,share=15%"}

// Demo is the demo's broker and the traffic it is to carry.
type Demo struct {
	cluster *kfake.Cluster
	addr    string
	gen     ingest.GenConfig
}

// Start checks o and starts the embedded broker. Close stops it.
func Start(o Options) (*Demo, error) {
	gc := ingest.GenConfig{Keys: o.Keys, S: o.Zipf, Rate: o.Rate, Duration: o.Duration, Seed: 1, App: "shop"}
	if o.Duration == 0 {
		gc.Duration = 100 * 365 * 24 * time.Hour
	}
	hots := o.Hot
	if len(hots) == 0 {
		hots = defaultHot
	}
	for _, h := range hots {
		hk, err := ingest.ParseHotKey(h)
		if err != nil {
			return nil, err
		}
		gc.Hot = append(gc.Hot, hk)
	}
	if o.Rate <= 0 {
		return nil, errors.New("--rate must be positive: the demo's event times follow it")
	}
	cluster, addr, err := startBroker(o.Port)
	if err != nil {
		return nil, err
	}
	return &Demo{cluster: cluster, addr: addr, gen: gc}, nil
}

// Addr is the broker's address, host:port.
func (d *Demo) Addr() string { return d.addr }

// Close stops the broker; what it held is gone.
func (d *Demo) Close() { d.cluster.Close() }

// Header is the demo's first line: the broker, the traffic, the planted
// keys and the rule that raises them (rate events/s, named rule).
func (d *Demo) Header(rate float64, rule string) string {
	var planted []string
	for _, h := range d.gen.Hot {
		planted = append(planted, fmt.Sprintf("%s at %s for %s (%.0f%%)", h.Key, h.Start, h.For, 100*h.Share))
	}
	return fmt.Sprintf("keyheat demo: Kafka on %s, %0.f events/s over %d keys, planted %s; hot at %.0f events/s (rule %q). Ctrl-C stops.",
		d.addr, d.gen.Rate, d.gen.Keys, strings.Join(planted, ", "), rate, rule)
}

// RunConfig is what Run needs of the detect service it runs beside.
type RunConfig struct {
	// ClientOpts connect to the demo's broker.
	ClientOpts []kgo.Opt
	// Events receives the traffic (made with Partitions and
	// ReplicationFactor when missing), dead letters going to DLQ; the
	// view follows Hotkeys and Reports.
	Events, DLQ       string
	Hotkeys, Reports  string
	Partitions        int32
	ReplicationFactor int16
	// Codec encodes the events.
	Codec schemas.Codec
	// Ready returns nil once the service joined its group (its topics
	// exist): the traffic waits for it.
	Ready func() error
	// Out receives the view; TTY redraws it in place every second,
	// otherwise alerts are lines as they come and a report line every
	// 5 s. Header is printed above it.
	Out    io.Writer
	TTY    bool
	Header string
	// Logger; nil discards.
	Logger *slog.Logger
}

// Run creates the events topic, then starts the traffic (once Ready) and
// the view; both end with ctx, and the returned wait waits for them.
func (d *Demo) Run(ctx context.Context, c RunConfig) (wait func(), err error) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	// The demo's events topic is its input, which detect never creates:
	// the demo does, as ingest would.
	if err := createTopic(ctx, c.ClientOpts, topics.Spec{Name: c.Events, Partitions: c.Partitions, ReplicationFactor: c.ReplicationFactor}); err != nil {
		return nil, err
	}
	prod, err := ingest.NewProducer(ingest.ProducerConfig{ProducerOptions: ingest.DefaultProducerOptions(), ClientOpts: c.ClientOpts,
		Topic: c.Events, DLQTopic: c.DLQ, Codec: c.Codec, Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	gen, err := ingest.NewGen(d.gen, prod, nil)
	if err != nil {
		prod.Close()
		return nil, err
	}
	every := 5 * time.Second
	if c.TTY {
		every = time.Second
	}
	view, err := NewView(ViewConfig{ClientOpts: c.ClientOpts, Hotkeys: c.Hotkeys, Reports: c.Reports,
		Out: c.Out, TTY: c.TTY, Every: every, Header: c.Header, Top: 10, Logger: c.Logger})
	if err != nil {
		prod.Close()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer prod.Close()
		// The generator waits for the service to have made the topics:
		// it only writes events, and ingest's own topic check is not here.
		if err := waitReady(ctx, c.Ready); err != nil {
			return
		}
		if _, err := gen.Run(ctx); err != nil && ctx.Err() == nil {
			c.Logger.Error("generator", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		_ = view.Run(ctx)
	}()
	return wg.Wait, nil
}

// createTopic creates the topic of spec unless it exists.
func createTopic(ctx context.Context, clientOpts []kgo.Opt, spec topics.Spec) error {
	cl, err := kgo.NewClient(clientOpts...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return topics.Ensure(ctx, cl, true, spec)
}

// waitReady waits until ready returns nil (the service joined its group,
// its topics exist) or ctx ends.
func waitReady(ctx context.Context, ready func() error) error {
	if ready == nil {
		return nil
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for ready() != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
