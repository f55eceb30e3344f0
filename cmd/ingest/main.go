// Command ingest reads access logs (files, stdin, raw topics, synthetic traffic) and
// produces keyed AccessEvents to Kafka; bad lines go to the DLQ.
//
//	ingest tail /var/log/nginx/access.log
//	redis-cli monitor | ingest stdin --ingest.format=redis
//	ingest topic app.raw.logs --ingest.format=json --ingest.topic.group=keyheat-ingest
//	ingest gen --rate=50000 --duration=1m --hot key=product:42,start=10s,for=30s,share=5%
//
// It exits 0 only when every line it read is on Kafka (or, for tail,
// in a committed transaction). SIGINT or SIGTERM stops reading and waits
// ingest.stop_timeout for Kafka; a second signal stops at once.
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
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/cmd/internal/cli"
	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/ingest"
	"github.com/keyheat/keyheat/internal/deadletters"
	"github.com/keyheat/keyheat/internal/progress"
	"github.com/keyheat/keyheat/internal/topics"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

func main() {
	ctx, stop := context.WithCancel(context.Background())
	force := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		stop() // stop reading; wait ingest.stop_timeout for Kafka
		<-sigs
		close(force) // stop waiting
	}()
	if err := newRoot(force).ExecuteContext(ctx); err != nil {
		printError(os.Stderr, err)
		os.Exit(1)
	}
}

// printError prints err after "ingest:", several problems (a config with
// more than one mistake) one per line.
func printError(w io.Writer, err error) { cli.PrintError(w, "ingest", err) }

// newRoot builds the command tree; closing force ends every wait for
// Kafka at once (a second signal).
func newRoot(force <-chan struct{}) *cobra.Command {
	root := &cobra.Command{Use: "ingest", Short: "Access logs to keyed events on Kafka", SilenceUsage: true, SilenceErrors: true}
	config.AddFlags(root.PersistentFlags(), config.CmdIngest)

	tail := &cobra.Command{Use: "tail FILE…", Short: "Follow files like tail -F, exactly once, resuming from positions kept in Kafka",
		Args: cobra.MinimumNArgs(1)}
	tail.Flags().Bool("from-start", false, "send what the files (and their rotated files) hold already when they have no saved position")
	tail.RunE = func(cmd *cobra.Command, args []string) error {
		return run(cmd, nil, force, subcommand{
			producer: func(cfg *config.Config, pc *ingest.ProducerConfig) {
				pc.TransactionalID = cfg.Ingest.Tail.TransactionalID()
				pc.PositionsTopic = cfg.Ingest.Tail.PositionsTopic
			},
			topics: func(cfg *config.Config) []topics.Spec {
				return []topics.Spec{{Name: cfg.Ingest.Tail.PositionsTopic, Partitions: 1,
					ReplicationFactor: int16(cfg.Kafka.ReplicationFactor), Configs: ingest.PositionsTopicConfigs()}}
			},
			build: func(env *env) (func(context.Context) error, error) {
				fromStart, _ := cmd.Flags().GetBool("from-start")
				tl, err := ingest.NewTailer(ingest.TailConfig{TailOptions: env.cfg.Ingest.Tail, Paths: args, FromStart: fromStart,
					StopTimeout: env.cfg.Ingest.Delivery.StopTimeout, Force: force, Logger: env.log}, env.lines)
				if err != nil {
					return nil, err
				}
				env.health.SetWaiting(tl.Waiting)
				return tl.Run, nil
			},
		})
	}

	stdin := &cobra.Command{Use: "stdin", Short: "Read lines from standard input; what Kafka does not take goes to a spill file", Args: cobra.NoArgs}
	stdin.RunE = func(cmd *cobra.Command, _ []string) error {
		return run(cmd, nil, force, subcommand{build: func(env *env) (func(context.Context) error, error) {
			return func(ctx context.Context) error {
				return ingest.ReadLines(ctx, os.Stdin, env.lines, ingest.StdinConfig{DeliveryOptions: env.cfg.Ingest.Delivery,
					Source: schemas.SourceStdin, Force: force, Logger: env.log})
			}, nil
		}})
	}

	topic := &cobra.Command{Use: "topic [TOPIC…]", Short: "Re-key raw log topics as a consumer group, committing after Kafka acknowledged"}
	topic.RunE = func(cmd *cobra.Command, args []string) error {
		var fromArgs map[string]any
		if len(args) > 0 {
			// Arguments replace ingest.topic.topics and are checked like it.
			fromArgs = map[string]any{"ingest.topic.topics": args}
		}
		return run(cmd, fromArgs, force, subcommand{build: func(env *env) (func(context.Context) error, error) {
			opts := env.cfg.Ingest.Topic
			if len(opts.Topics) == 0 {
				return nil, errors.New("no raw topic to read: name one as an argument or set ingest.topic.topics")
			}
			src, err := ingest.NewTopic(ingest.TopicConfig{TopicOptions: opts, ClientOpts: env.clientOpts, Logger: env.log,
				StopTimeout: env.cfg.Ingest.Delivery.StopTimeout, Force: force, Health: env.health}, env.lines)
			if err != nil {
				return nil, err
			}
			env.closers = append(env.closers, src.Close)
			return src.Run, nil
		}})
	}

	gen := &cobra.Command{Use: "gen", Short: "Produce synthetic Zipf traffic with planted hot keys", Args: cobra.NoArgs}
	gf := gen.Flags()
	gf.Int("keys", 100_000, "distinct background keys, 1 to 10000000")
	gf.Float64("zipf", 1.1, "Zipf exponent s (0: uniform)")
	gf.Float64("rate", 0, "events per second (0: as fast as possible)")
	gf.Duration("duration", 0, "stop after this long (event time)")
	gf.Int64("count", 0, "stop after this many events")
	gf.Uint64("seed", 1, "random seed")
	gf.StringArray("hot", nil, "planted key, repeatable: key=NAME,share=PCT%[,start=DUR][,for=DUR], e.g. key=product:42,start=10s,for=30s,share=5%")
	gen.RunE = func(cmd *cobra.Command, _ []string) error {
		return run(cmd, nil, force, subcommand{build: func(env *env) (func(context.Context) error, error) {
			var cfg ingest.GenConfig
			cfg.Keys, _ = gf.GetInt("keys")
			cfg.S, _ = gf.GetFloat64("zipf")
			cfg.Rate, _ = gf.GetFloat64("rate")
			cfg.Duration, _ = gf.GetDuration("duration")
			cfg.Count, _ = gf.GetInt64("count")
			cfg.Seed, _ = gf.GetUint64("seed")
			cfg.App = env.cfg.Ingest.Parse.App
			cfg.StopTimeout, cfg.Force = env.cfg.Ingest.Delivery.StopTimeout, force
			hots, _ := gf.GetStringArray("hot")
			for _, h := range hots {
				hk, err := ingest.ParseHotKey(h)
				if err != nil {
					return nil, fmt.Errorf("--hot: %w", err)
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
		}})
	}
	example := &cobra.Command{Use: "example-config", Short: "Print a config file with every key of every command, its default and what it does", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := os.Stdout.Write(config.Example())
			return err
		}}
	root.AddCommand(tail, stdin, topic, gen, example)
	cli.SetupHelp(root, config.CmdIngest, map[string][]string{"tail": tailReads, "stdin": stdinReads, "topic": topicReads, "gen": genReads})
	return root
}

// subcommand is what a subcommand adds to the common run.
type subcommand struct {
	// producer adjusts the producer's config (the tail's is
	// transactional); nil keeps it.
	producer func(*config.Config, *ingest.ProducerConfig)
	// topics are the topics it needs besides the events and DLQ topics.
	topics func(*config.Config) []topics.Spec
	// build makes the source from env; what it returns runs it.
	build func(*env) (func(context.Context) error, error)
}

// env is what every subcommand is built from.
type env struct {
	cfg        *config.Config
	clientOpts []kgo.Opt // connect to cfg.Kafka
	log        *slog.Logger
	stats      *ingest.Stats
	health     *ingest.KafkaHealth
	prod       *ingest.Producer
	lines      *ingest.LineSender
	// closers release what a subcommand's build made when it is not run.
	closers []func()
}

// run loads and validates the config (with args, keys set by arguments),
// then builds everything that can fail on a setting: logger, metrics
// listener, parser, producer, line sender, and the subcommand's source
// (build). Only then does it contact Kafka, waiting for it and making sure
// the topics exist, and run the source with a progress line; it tears
// everything down after and says in one summary line what was read and
// delivered.
func run(cmd *cobra.Command, args map[string]any, force <-chan struct{}, sub subcommand) error {
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
	var registry *prometheus.Registry
	if cfg.Metrics.Addr != "" {
		registry = cli.NewRegistry()
		reg = registry
	}
	health := ingest.NewKafkaHealth(cfg.Kafka.Brokers, log, reg)
	if registry != nil {
		ready := func() error {
			if ok, why := health.Ready(); !ok {
				return errors.New(why)
			}
			return nil
		}
		srv, err := cli.Serve(cfg.Metrics.Addr, registry, ready, log)
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
	pc := ingest.ProducerConfig{ProducerOptions: cfg.Ingest.Producer, ClientOpts: clientOpts,
		Topic: cfg.Kafka.Topics.Events, DLQTopic: cfg.Kafka.Topics.DLQ, Codec: codec, Health: health, Logger: log}
	if sub.producer != nil {
		sub.producer(cfg, &pc)
	}
	prod, err := ingest.NewProducer(pc)
	if err != nil {
		return err
	}
	defer prod.Close()
	stats := ingest.NewStats(reg)
	health.SetWaiting(stats.Waiting)
	lines, err := ingest.NewLineSender(ingest.LineSenderConfig{LineOptions: cfg.Ingest.Lines, Parser: parser, Producer: prod,
		Limits: cfg.Events.Limits, Stats: stats})
	if err != nil {
		return err
	}
	e := &env{cfg: cfg, clientOpts: clientOpts, log: log, stats: stats, health: health, prod: prod, lines: lines}
	defer func() {
		for _, c := range e.closers {
			c()
		}
	}()
	runSource, err := sub.build(e)
	if err != nil {
		return err
	}

	hctx, stopHealth := context.WithCancel(context.Background())
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		health.Run(hctx, 500*time.Millisecond)
	}()
	defer func() {
		stopHealth()
		<-healthDone
	}()
	// Said as soon as a signal comes, and in any case before the summary:
	// the AfterFunc's goroutine may not have run by then.
	var sayStop sync.Once
	said := func() {
		sayStop.Do(func() {
			log.Info(fmt.Sprintf("stopping: no more reading; waiting up to %s (ingest.stop_timeout) for kafka to take what was read; a second signal stops at once",
				cfg.Ingest.Delivery.StopTimeout))
		})
	}
	stopSaid := context.AfterFunc(ctx, said)
	defer stopSaid()
	var extra []topics.Spec
	if sub.topics != nil {
		extra = sub.topics(cfg)
	}
	if err := ensureTopics(ctx, cfg, prod, extra); err != nil {
		return err
	}

	pctx, stopProgress := context.WithCancel(context.WithoutCancel(ctx))
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tty := progress.Terminal(os.Stderr)
		interval := time.Second
		if tty == nil {
			interval = 10 * time.Second
		}
		ingest.Progress(pctx, stats, tty, log, interval)
	}()
	err = runSource(ctx)
	if ctx.Err() != nil {
		said()
	}
	stopProgress()
	<-progressDone
	dlq := stats.DeadLetters()
	summary := []any{"lines", stats.Lines.Load(), "delivered", stats.Delivered.Load(), "undelivered", stats.Undelivered.Load(),
		"events", stats.Events.Load()}
	summary = append(summary, dlq.Attrs()...)
	summary = append(summary, "skipped", stats.Skipped.Load(), "dropped_fields", stats.DroppedSummary(), "failed", stats.Failed.Load())
	if n := stats.GoneFiles.Load(); n > 0 {
		summary = append(summary, "gone_files", n, "unread_bytes", stats.UnreadBytes.Load())
	}
	// After the summary, whatever the outcome: most lines in the DLQ is a
	// setting that does not fit the input, and the warning names it.
	defer dlq.WarnIfMost(log, cfg.Kafka.Topics.DLQ, func(r schemas.Reason) string { return deadletters.Fix(r, "ingest") })
	if err != nil {
		log.Error("stopped with lines not delivered or an error", summary...)
		return err
	}
	if stats.GoneFiles.Load() > 0 {
		// Every line read is on Kafka, but not every line written was read.
		log.Warn("stopped; every line read was delivered, but rotated files were deleted before they were read (see the errors above)", summary...)
		return nil
	}
	log.Info("stopped; every line read was delivered", summary...)
	return nil
}

// ensureTopics checks, before anything is read, that the events and DLQ
// topics (and extra) exist, creating them when kafka.create_topics
// allows. It is the first contact with the brokers: when they do not
// answer it waits for them, as long as kafka.connect_timeout allows (by
// default without a limit), the same way a broker going away mid-run is
// waited for; KafkaHealth says so. Brokers that refuse the TLS or SASL
// settings fail it at once (config.Kafka.CheckAccess).
func ensureTopics(ctx context.Context, cfg *config.Config, prod *ingest.Producer, extra []topics.Spec) error {
	if cfg.Kafka.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Kafka.ConnectTimeout)
		defer cancel()
	}
	spec := func(name string) topics.Spec {
		return topics.Spec{Name: name, Partitions: int32(cfg.Kafka.Partitions), ReplicationFactor: int16(cfg.Kafka.ReplicationFactor)}
	}
	specs := append([]topics.Spec{spec(cfg.Kafka.Topics.Events), spec(cfg.Kafka.Topics.DLQ)}, extra...)
	for {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		// Brokers that refuse the TLS or SASL settings will not change
		// their minds: that fails at once, naming the setting, while an
		// absent broker is waited for (by the producer's client, whose
		// failures KafkaHealth reports).
		var refused *config.FieldError
		if err := cfg.Kafka.CheckAccess(actx); errors.As(err, &refused) {
			cancel()
			return err
		}
		err := topics.Ensure(actx, prod.Client(), cfg.Kafka.CreateTopics, specs...)
		cancel()
		var missing *topics.MissingError
		var ke *kerr.Error
		switch {
		case err == nil:
			return nil
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fmt.Errorf("no answer from kafka.brokers %s within kafka.connect_timeout %s (is the address right, and TLS/SASL set as the brokers expect?): %w",
				strings.Join(cfg.Kafka.Brokers, ","), cfg.Kafka.ConnectTimeout, err)
		case ctx.Err() != nil:
			return errors.New("stopped while waiting for kafka; nothing was read")
		case errors.As(err, &missing), errors.As(err, &ke) && !ke.Retriable:
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
