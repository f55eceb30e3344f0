// Command ingest reads access logs (files, stdin, raw topics, synthetic traffic) and
// produces keyed AccessEvents to Kafka; bad lines go to the DLQ.
//
//	ingest tail /var/log/nginx/access.log --ingest.state_file=/var/lib/keyheat/tail.json
//	redis-cli monitor | ingest stdin --ingest.format=redis
//	ingest topic app.raw.logs --ingest.format=json --ingest.topic.group=keyheat-ingest
//	ingest gen --rate=50000 --duration=1m --hot key=product:42,start=10s,for=30s,share=5%
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/cli"
	"github.com/keyheat/keyheat/internal/topics"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		printError(os.Stderr, err)
		os.Exit(1)
	}
}

// printError prints err after "ingest:", several problems (a config with
// more than one mistake) one per line.
func printError(w io.Writer, err error) { cli.PrintError(w, "ingest", err) }

func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "ingest", Short: "Access logs to keyed events on Kafka", SilenceUsage: true, SilenceErrors: true}
	config.AddFlags(root.PersistentFlags(), config.CmdIngest)

	tail := &cobra.Command{Use: "tail FILE…", Short: "Follow files like tail -F, resuming from a state file", Args: cobra.MinimumNArgs(1)}
	tail.Flags().Bool("from-start", false, "read what the files held before the first start")
	tail.RunE = func(cmd *cobra.Command, args []string) error {
		return run(cmd, nil, func(env *env) (func(context.Context) error, error) {
			fromStart, _ := cmd.Flags().GetBool("from-start")
			tl, err := ingest.NewTailer(ingest.TailConfig{TailOptions: env.cfg.Ingest.Tail, Paths: args, FromStart: fromStart,
				Logger: env.log}, env.lines)
			if err != nil {
				return nil, err
			}
			return tl.Run, nil
		})
	}

	stdin := &cobra.Command{Use: "stdin", Short: "Read lines from standard input", Args: cobra.NoArgs}
	stdin.RunE = func(cmd *cobra.Command, _ []string) error {
		return run(cmd, nil, func(env *env) (func(context.Context) error, error) {
			return func(ctx context.Context) error {
				return ingest.ReadLines(ctx, os.Stdin, schemas.SourceStdin, env.lines)
			}, nil
		})
	}

	topic := &cobra.Command{Use: "topic [TOPIC…]", Short: "Re-key raw log topics as a consumer group, committing after Kafka acknowledged"}
	topic.RunE = func(cmd *cobra.Command, args []string) error {
		var fromArgs map[string]any
		if len(args) > 0 {
			// Arguments replace ingest.topic.topics and are checked like it.
			fromArgs = map[string]any{"ingest.topic.topics": args}
		}
		return run(cmd, fromArgs, func(env *env) (func(context.Context) error, error) {
			opts := env.cfg.Ingest.Topic
			if len(opts.Topics) == 0 {
				return nil, errors.New("no raw topic to read: name one as an argument or set ingest.topic.topics")
			}
			src, err := ingest.NewTopic(ingest.TopicConfig{TopicOptions: opts, ClientOpts: env.clientOpts, Logger: env.log}, env.lines)
			if err != nil {
				return nil, err
			}
			env.closers = append(env.closers, src.Close)
			return src.Run, nil
		})
	}

	gen := &cobra.Command{Use: "gen", Short: "Produce synthetic Zipf traffic with planted hot keys", Args: cobra.NoArgs}
	gf := gen.Flags()
	gf.Int("keys", 100_000, "distinct background keys")
	gf.Float64("zipf", 1.1, "Zipf exponent s (0: uniform)")
	gf.Float64("rate", 0, "events per second (0: as fast as possible)")
	gf.Duration("duration", 0, "stop after this long (event time)")
	gf.Int64("count", 0, "stop after this many events")
	gf.Uint64("seed", 1, "random seed")
	gf.StringArray("hot", nil, "planted key, repeatable: key=product:42,start=10s,for=30s,share=5%")
	gen.RunE = func(cmd *cobra.Command, _ []string) error {
		return run(cmd, nil, func(env *env) (func(context.Context) error, error) {
			var cfg ingest.GenConfig
			cfg.Keys, _ = gf.GetInt("keys")
			cfg.S, _ = gf.GetFloat64("zipf")
			cfg.Rate, _ = gf.GetFloat64("rate")
			cfg.Duration, _ = gf.GetDuration("duration")
			cfg.Count, _ = gf.GetInt64("count")
			cfg.Seed, _ = gf.GetUint64("seed")
			cfg.App = env.cfg.Ingest.Parse.App
			hots, _ := gf.GetStringArray("hot")
			for _, h := range hots {
				hk, err := ingest.ParseHotKey(h)
				if err != nil {
					return nil, err
				}
				cfg.Hot = append(cfg.Hot, hk)
			}
			g, err := ingest.NewGen(cfg, env.prod, env.stats)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				counts, err := g.Run(ctx)
				// The contract with tests and users: one line per planted
				// key, on stdout, with its exact acknowledged count.
				for _, h := range cfg.Hot {
					fmt.Fprintf(os.Stdout, "planted key=%s count=%d\n", h.Key, counts[h.Key])
				}
				fmt.Fprintf(os.Stdout, "total events=%d\n", env.stats.Events.Load())
				return err
			}, nil
		})
	}
	example := &cobra.Command{Use: "example-config", Short: "Print a config file with every key of every command, its default and what it does", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := os.Stdout.Write(config.Example())
			return err
		}}
	root.AddCommand(tail, stdin, topic, gen, example)
	return root
}

// env is what every subcommand is built from.
type env struct {
	cfg        *config.Config
	clientOpts []kgo.Opt // connect to cfg.Kafka
	log        *slog.Logger
	stats      *ingest.Stats
	prod       *ingest.Producer
	lines      *ingest.LineSender
	// closers release what a subcommand's build made when it is not run.
	closers []func()
}

// run loads and validates the config (with args, keys set by arguments),
// then builds everything that can fail on a setting: logger, metrics
// listener, parser, producer, line sender, and the subcommand's source
// (build). Only then does it contact Kafka, making sure the output topics
// exist, and run the source with a progress line; it tears everything
// down after.
func run(cmd *cobra.Command, args map[string]any, build func(*env) (func(context.Context) error, error)) error {
	ctx := cmd.Context()
	// cmd.Flags() is the set cobra parsed, the root's persistent flags
	// merged in; only it knows which flags the user set (a copy made with
	// AddFlagSet does not, and Load would then see none).
	fs := cmd.Flags()
	file, _ := fs.GetString("config")
	cfg, err := config.Load(config.CmdIngest, config.Source{File: file, Flags: fs, Args: args})
	if err != nil {
		return err
	}
	log := cli.NewLogger(cfg.Log, os.Stderr)
	var reg prometheus.Registerer
	if cfg.Metrics.Addr != "" {
		r := prometheus.NewRegistry()
		reg = r
		srv, err := cli.Serve(cfg.Metrics.Addr, r, nil, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	codec, err := schemas.CodecByName(cfg.Events.Codec)
	if err != nil {
		return err
	}
	clientOpts, err := cfg.Kafka.ClientOpts()
	if err != nil {
		return err
	}
	parser, err := logparse.New(cfg.Ingest.Parse)
	if err != nil {
		return err
	}
	prod, err := ingest.NewProducer(ingest.ProducerConfig{ProducerOptions: cfg.Ingest.Producer, ClientOpts: clientOpts,
		Topic: cfg.Kafka.Topics.Events, DLQTopic: cfg.Kafka.Topics.DLQ, Codec: codec, Logger: log})
	if err != nil {
		return err
	}
	defer prod.Close()
	stats := ingest.NewStats(reg)
	lines, err := ingest.NewLineSender(ingest.LineSenderConfig{LineOptions: cfg.Ingest.Lines, Parser: parser, Producer: prod,
		Limits: cfg.Events.Limits, Stats: stats})
	if err != nil {
		return err
	}
	e := &env{cfg: cfg, clientOpts: clientOpts, log: log, stats: stats, prod: prod, lines: lines}
	defer func() {
		for _, c := range e.closers {
			c()
		}
	}()
	runSource, err := build(e)
	if err != nil {
		return err
	}
	if err := ensureTopics(ctx, cfg, prod); err != nil {
		return err
	}

	pctx, stopProgress := context.WithCancel(context.WithoutCancel(ctx))
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		var tty io.Writer
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = os.Stderr
		}
		interval := time.Second
		if tty == nil {
			interval = 10 * time.Second
		}
		ingest.Progress(pctx, stats, tty, log, interval)
	}()
	err = runSource(ctx)
	stopProgress()
	<-progressDone
	log.Info("stopped", "lines", stats.Lines.Load(), "events", stats.Events.Load(), "dlq", stats.DLQ.Load(),
		"skipped", stats.Skipped.Load(), "failed", stats.Failed.Load())
	return err
}

// ensureTopics checks, before anything is read, that the events and DLQ
// topics exist, creating them when kafka.create_topics allows; it is also
// the first contact with the brokers, so a wrong address fails here.
func ensureTopics(ctx context.Context, cfg *config.Config, prod *ingest.Producer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	spec := func(name string) topics.Spec {
		return topics.Spec{Name: name, Partitions: int32(cfg.Kafka.Partitions), ReplicationFactor: int16(cfg.Kafka.ReplicationFactor)}
	}
	err := topics.Ensure(ctx, prod.Client(), cfg.Kafka.CreateTopics, spec(cfg.Kafka.Topics.Events), spec(cfg.Kafka.Topics.DLQ))
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("no answer from kafka.brokers %s within 30s (is the address right, and TLS/SASL set as the brokers expect?): %w",
			strings.Join(cfg.Kafka.Brokers, ","), err)
	}
	return err
}
