// Command detect finds hot keys and skew in the access events on Kafka:
// a consumer group with one goroutine per partition, publishing hot keys
// the moment they turn hot and window reports merged across partitions.
//
//	detect demo                                  # nothing to install: embedded Kafka, traffic, live view
//	detect run                                   # the service, as configured (keyheat.yaml, KEYHEAT_*, flags)
//	detect run --from=2026-01-02T15:00:00Z --exit-at-end --print=text   # from records produced since then to the end (no --to)
//	detect run --format=combined --detect.topics=nginx.raw               # raw access logs, no ingest hop
//	detect replay --from=2026-01-02T14:00:00Z --to=2026-01-02T14:10:00Z  # the archive through the same detection
//	detect query top --since=1h --app=shop                               # ask ClickHouse
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/keyheat/keyheat/cmd/internal/cli"
	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/config/reload"
	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/demo"
	"github.com/keyheat/keyheat/internal/progress"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot(os.Stdout).ExecuteContext(ctx); err != nil {
		cli.PrintError(os.Stderr, "detect", err)
		os.Exit(1)
	}
}

func newRoot(stdout io.Writer) *cobra.Command {
	root := &cobra.Command{Use: "detect", Short: "Hot keys and skew in access events on Kafka", SilenceUsage: true, SilenceErrors: true}
	config.AddFlags(root.PersistentFlags(), config.CmdDetect)

	run := &cobra.Command{Use: "run", Short: "Run detection as a member of the detect group", Args: cobra.NoArgs}
	rf := run.Flags()
	addShortcuts(rf)
	rf.Bool("exit-at-end", false, "read every assigned partition up to its end at start, close every window, report, commit and exit 0; "+
		"exit 1 instead when records were read and none gave an event (they went to the DLQ: the log says why and which setting fixes it)")
	rf.String("print", "", "write hot-key events and reports to stdout as they are produced: text or json")
	run.RunE = func(cmd *cobra.Command, _ []string) error {
		exitAtEnd, _ := rf.GetBool("exit-at-end")
		printFormat, _ := rf.GetString("print")
		if printFormat != "" && printFormat != detect.PrintText && printFormat != detect.PrintJSON {
			return fmt.Errorf("--print=%q: want text or json", printFormat)
		}
		cfg, src, err := load(cmd, nil)
		if err != nil {
			return err
		}
		return runService(cmd.Context(), cfg, src, runOpts{exitAtEnd: exitAtEnd, print: printFormat, stdout: stdout})
	}

	demo := &cobra.Command{Use: "demo", Short: "Embedded Kafka, synthetic traffic with planted hot keys, detection and a live view", Args: cobra.NoArgs}
	df := demo.Flags()
	df.Int("port", 9092, "port of the embedded Kafka broker on 127.0.0.1 (0: any free port)")
	df.Float64("rate", 10_000, "events per second of synthetic traffic")
	df.Int("keys", 100_000, "distinct background keys")
	df.Float64("zipf", 0.8, "Zipf exponent of the background keys (0: uniform)")
	df.Duration("duration", 0, "stop after this long (0: until interrupted)")
	df.StringArray("hot", nil, "planted key, repeatable, replacing the default schedule: key=product:42,start=5s,for=20s,share=20%")
	demo.RunE = func(cmd *cobra.Command, _ []string) error { return runDemo(cmd, df, stdout) }

	example := &cobra.Command{Use: "example-config", Short: "Print a config file with every key of every command, its default and what it does", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := stdout.Write(config.Example())
			return err
		}}
	root.AddCommand(run, demo, example, newReplayCmd(stdout), newQueryCmd(stdout))
	cli.SetupHelp(root, config.CmdDetect, map[string][]string{"run": runReads, "demo": demoReads, "replay": replayReads, "query": queryReads})
	return root
}

// addShortcuts adds --from and --format, which set detect.from and
// detect.format.
func addShortcuts(fs *pflag.FlagSet) {
	fs.String("from", "", "where a partition with no commit starts: earliest, latest or an RFC 3339 time, compared with the records' Kafka timestamps (produce time, not event time) (sets detect.from)")
	fs.String("format", "", "read raw log records of this format instead of events: "+strings.Join(logFormats(), ", ")+" (sets detect.format)")
}

func logFormats() []string { return []string{"combined", "json", "redis", "regex"} }

// load loads and validates the configuration; args are keys set by the
// command (the demo's broker), above everything else.
func load(cmd *cobra.Command, args map[string]any) (*config.Config, config.Source, error) {
	fs := cmd.Flags()
	if args == nil {
		args = map[string]any{}
	}
	for flag, key := range map[string]string{"from": "detect.from", "format": "detect.format"} {
		if f := fs.Lookup(flag); f != nil && f.Changed {
			args[key] = f.Value.String()
		}
	}
	file, _ := fs.GetString("config")
	src := config.Source{File: file, Flags: fs, Args: args}
	cfg, err := config.Load(config.CmdDetect, src)
	return cfg, src, err
}

type runOpts struct {
	exitAtEnd bool
	print     string
	stdout    io.Writer
	// apiAnyPort serves the API on any free port of 127.0.0.1 when
	// api.addr is taken (the demo's default address).
	apiAnyPort bool
	// started, when set, is called once the service is built, before it
	// connects: the demo starts its traffic and view then. What it starts
	// ends with ctx; the returned wait waits for it.
	started func(ctx context.Context, env *serviceEnv) (wait func(), err error)
}

// serviceEnv is what a running service was built with.
type serviceEnv struct {
	cfg *config.Config
	log *slog.Logger
	svc *detect.Service
	// apiURL is where the operator API and dashboard are served; "" when
	// they are not.
	apiURL string
}

// runService builds everything that can fail on a setting (logger,
// endpoint, sinks, service), then runs the service until ctx ends (or the
// end of the input), reloading the rules when the config file changes.
//
// A stop that leaves output unwritten (ClickHouse down at SIGTERM, an
// archive segment that could not be closed) returns an error, so the exit
// status says so: the offsets of what was not written are not committed,
// and the next run of the group reads it again from there.
func runService(ctx context.Context, cfg *config.Config, src config.Source, o runOpts) (err error) {
	log := cli.NewLogger(cfg.Log, os.Stderr)
	reg := cli.NewRegistry()
	clientOpts, err := cfg.Kafka.ClientOpts()
	if err != nil {
		return err
	}
	// /readyz is served from the start, while the service is still being
	// built (ClickHouse migrations can take a while): the handler reads
	// the service from another goroutine, hence the atomic.
	var ready atomic.Pointer[detect.Service]
	readyFn := func() error {
		svc := ready.Load()
		if svc == nil {
			return errors.New("starting")
		}
		return svc.Ready()
	}
	var api *operatorAPI
	if cfg.API.Addr != "" {
		if api, err = newOperatorAPI(cfg, clientOpts, reg, log); err != nil {
			return err
		}
		defer api.Close()
	}
	if cfg.Metrics.Addr != "" {
		mux := cli.MetricsMux(reg, readyFn)
		var h http.Handler = mux
		if api != nil && cfg.API.Addr == cfg.Metrics.Addr {
			h = api.withMetrics(mux)
		}
		srv, err := cli.Listen("metrics.addr", cfg.Metrics.Addr, h, log)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	var apiURL string
	if api != nil {
		addr := cfg.Metrics.Addr
		if cfg.API.Addr != cfg.Metrics.Addr {
			srv, err := cli.Listen("api.addr", cfg.API.Addr, api.handler, log)
			if err != nil && o.apiAnyPort {
				srv, err = cli.Listen("api.addr", "127.0.0.1:0", api.handler, log)
			}
			if err != nil {
				return err
			}
			defer srv.Close()
			addr = srv.Addr()
		}
		apiURL = "http://" + addr + "/"
		log.Info("serving the operator API and dashboard", "url", apiURL)
	}
	dc := detect.Config{
		Options:    cfg.Detect,
		ClientOpts: clientOpts,
		Topics: detect.OutputTopics{Events: cfg.Kafka.Topics.Events, DLQ: cfg.Kafka.Topics.DLQ, Hotkeys: cfg.Kafka.Topics.Hotkeys,
			Windows: cfg.Kafka.Topics.Windows, Reports: cfg.Kafka.Topics.Reports, Progress: cfg.Kafka.Topics.Progress},
		CreateTopics: cfg.Kafka.CreateTopics, Partitions: int32(cfg.Kafka.Partitions), ReplicationFactor: int16(cfg.Kafka.ReplicationFactor),
		Limits:    cfg.Events.Limits,
		ExitAtEnd: o.exitAtEnd,
		Pipeline:  cfg.Pipeline,
		Merge: &pipeline.MergerConfig{MergerOptions: cfg.Merge, Window: cfg.Pipeline.Window, Lateness: cfg.Pipeline.Lateness,
			Logger: log},
		Logger:     log,
		LogRawKeys: cfg.Log.RawKeys(),
		Registerer: reg,
	}
	if api != nil {
		dc.Topics.ClientStats = cfg.Kafka.Topics.ClientStats
	}
	if o.print != "" {
		dc.Print, dc.PrintFormat = o.stdout, o.print
	}
	// Local folders first: a wrong archive.root fails before ClickHouse
	// migrations run or Kafka is contacted.
	if cfg.Archive.Root != "" {
		a, oerr := archive.Open(ctx, cfg.Archive, log, reg)
		if oerr != nil {
			return fmt.Errorf("archive: %w", oerr)
		}
		defer func() {
			if cerr := a.Close(); cerr != nil {
				log.Error("close archive", "err", cerr)
				err = errors.Join(err, fmt.Errorf("stopped with archive segments not made durable; their offsets are not committed, so the next run of group %s resumes before them and writes them: %w", cfg.Detect.Group, cerr))
			}
		}()
		dc.Archive, dc.ArchiveFlush = a, cfg.Archive.SegmentAge
	}
	if cfg.ClickHouse.Enabled {
		w, oerr := clickhouse.Open(ctx, cfg.ClickHouse.Options, clickhouse.Deps{Logger: log, Registerer: reg})
		if oerr != nil {
			return fmt.Errorf("clickhouse: %w", oerr)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), cfg.Detect.FlushTimeout)
			defer cancel()
			stopSay := cli.SayWhileWaiting(cctx, log, "stopping: waiting for ClickHouse to take the rows the writer still holds (its retries are logged); past the deadline they are left for the next run")
			cerr := w.Close(cctx)
			stopSay()
			if cerr != nil {
				log.Error("close clickhouse", "err", cerr)
				err = errors.Join(err, fmt.Errorf("stopped with rows not written to ClickHouse; their offsets are not committed, so the next run of group %s resumes before them and writes them: %w", cfg.Detect.Group, cerr))
			}
		}()
		dc.ClickHouse = w
	}
	svc, err := detect.New(dc)
	if err != nil {
		return err
	}
	if err := checkKafkaAccess(ctx, cfg); err != nil {
		return err
	}
	ready.Store(svc)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		reload.Watch(runCtx, src, svc, log)
	}()
	if o.started != nil {
		wait, err := o.started(runCtx, &serviceEnv{cfg: cfg, log: log, svc: svc, apiURL: apiURL})
		if err != nil {
			return err
		}
		defer func() { cancel(); wait() }()
	}
	log.Info("detect starting", "group", cfg.Detect.Group, "brokers", strings.Join(cfg.Kafka.Brokers, ","),
		"rules", len(cfg.Pipeline.Rules), "exit_at_end", o.exitAtEnd, "memory_bound_per_partition_bytes", cfg.Pipeline.MemoryBound())
	return svc.Run(runCtx)
}

// checkKafkaAccess fails when the brokers refuse the TLS or SASL
// settings, naming the one to fix; brokers that do not answer are left to
// the service's own wait for them (its topic check).
func checkKafkaAccess(ctx context.Context, cfg *config.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := cfg.Kafka.CheckAccess(ctx)
	if refused := (*config.FieldError)(nil); errors.As(err, &refused) {
		return err
	}
	return nil
}

// runDemo starts the embedded broker, then detection, the traffic and
// the view against it (package demo).
func runDemo(cmd *cobra.Command, df *pflag.FlagSet, stdout io.Writer) error {
	ctx := cmd.Context()
	var o demo.Options
	o.Port, _ = df.GetInt("port")
	o.Rate, _ = df.GetFloat64("rate")
	o.Keys, _ = df.GetInt("keys")
	o.Zipf, _ = df.GetFloat64("zipf")
	o.Duration, _ = df.GetDuration("duration")
	o.Hot, _ = df.GetStringArray("hot")
	d, err := demo.Start(o)
	if err != nil {
		return err
	}
	defer d.Close()
	cfg, src, err := load(cmd, map[string]any{"kafka.brokers": []string{d.Addr()}})
	if err != nil {
		return err
	}
	// The demo serves the dashboard unless told where: on 8080, or any
	// free port. With no token configured it makes one for this run, so
	// the dashboard's buttons work, and prints it.
	anyPort := cfg.API.Addr == ""
	if anyPort {
		cfg.API.Addr = "127.0.0.1:8080"
	}
	var demoToken string
	if cfg.API.Token == "" && cfg.API.TokenFile == "" {
		var b [16]byte
		_, _ = crand.Read(b[:])
		demoToken = hex.EncodeToString(b[:])
		cfg.API.Token = demoToken
	}
	header := d.Header(cfg.Pipeline.Rules[0].Rate, cfg.Pipeline.Rules[0].Name)
	started := func(ctx context.Context, env *serviceEnv) (func(), error) {
		header := header
		if env.apiURL != "" {
			header += "\nDashboard: " + env.apiURL
			if demoToken != "" {
				header += " (token for promote and demote, this run only: " + demoToken + ")"
			}
		}
		clientOpts, err := cfg.Kafka.ClientOpts()
		if err != nil {
			return nil, err
		}
		codec, err := schemas.CodecByName(cfg.Events.Codec)
		if err != nil {
			return nil, err
		}
		return d.Run(ctx, demo.RunConfig{ClientOpts: clientOpts, Events: cfg.Kafka.Topics.Events, DLQ: cfg.Kafka.Topics.DLQ,
			Hotkeys: cfg.Kafka.Topics.Hotkeys, Reports: cfg.Kafka.Topics.Reports,
			Partitions: int32(cfg.Kafka.Partitions), ReplicationFactor: int16(cfg.Kafka.ReplicationFactor), Codec: codec,
			Ready: env.svc.Ready, Out: stdout, TTY: progress.Terminal(stdout) != nil, Header: header, Logger: env.log})
	}
	return runService(ctx, cfg, src, runOpts{stdout: stdout, started: started, apiAnyPort: anyPort})
}
