package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keyheat/keyheat/cmd/internal/cli"
	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/detect"
	"github.com/keyheat/keyheat/internal/progress"
	"github.com/keyheat/keyheat/internal/republish"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

func newReplayCmd(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "replay",
		Short: "Run the Parquet archive of a time range through the detection code live runs, or back into a topic",
		Long: `replay reads the events archive (archive.root, or --archive) for a time
range in event-time order and runs it through the same per-partition
detection and merger as detect run, with the pipeline: and merge: settings
in force, so a post-mortem sees the alerts and reports the live run saw.

Outputs: the terminal (text, or --json lines), a Parquet folder
(--out-parquet), ClickHouse (--clickhouse, the clickhouse: settings), or,
instead of detection, the events themselves back into a Kafka topic
(--to-topic, paced with --speed).`,
		Example: `  detect replay --from=2026-01-02T14:00:00Z --to=2026-01-02T14:10:00Z --app=shop
  detect replay --archive=/var/lib/keyheat --from=2026-01-02T14:00:00Z --json > reports.jsonl
  detect replay --from=2026-01-02T14:00:00Z --to-topic=keyheat.events.replay --speed=10x`,
		Args: cobra.NoArgs,
	}
	f := c.Flags()
	f.String("from", "", "replay events at or after this RFC 3339 time (default: the archive's start)")
	f.String("to", "", "replay events before this RFC 3339 time (default: the archive's end)")
	f.StringSlice("app", nil, "replay only these apps (repeatable; default every app)")
	f.String("key-prefix", "", "replay only keys starting with this")
	f.String("archive", "", "the archive's root folder (default archive.root)")
	f.Bool("skip-bad-files", false, "log and skip archive files that cannot be read (truncated, foreign) instead of stopping")
	f.Bool("json", false, "print hot-key events and reports as JSON lines instead of text")
	f.Int("top", 5, "keys per report in the text output")
	f.String("out-parquet", "", "write the replay's reports and hot-key events to this folder, in the archive's layout (made if missing; its parent must exist)")
	f.Bool("clickhouse", false, "write the replay's reports and hot-key events to ClickHouse (clickhouse.* settings)")
	f.String("to-topic", "", "produce the archived events to this topic instead of detecting (keyed by access key, events.codec)")
	f.String("speed", "max", "--to-topic pacing against the events' times: 1x, 10x (any Nx) or max")
	f.Bool("progress", true, "show progress on standard error: a bar on a terminal, a line every 5s otherwise")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		o, err := replayFlags(cmd)
		if err != nil {
			return err
		}
		file, _ := cmd.Flags().GetString("config")
		cfg, err := config.Load(config.CmdDetect, config.Source{File: file, Flags: cmd.Flags()})
		if err != nil {
			return err
		}
		if o.root == "" {
			o.root = cfg.Archive.Root
		}
		if o.root == "" {
			return errors.New("no archive: set archive.root or pass --archive")
		}
		return runReplay(cmd.Context(), cfg, o, stdout, cmd.ErrOrStderr())
	}
	return c
}

// replayOpts are replay's flags, checked.
type replayOpts struct {
	root       string
	q          archive.Query
	json       bool
	top        int
	outParquet string
	clickhouse bool
	toTopic    string
	speed      float64 // 0: as fast as possible
	progress   bool
}

func replayFlags(cmd *cobra.Command) (replayOpts, error) {
	f := cmd.Flags()
	var o replayOpts
	from, _ := f.GetString("from")
	to, _ := f.GetString("to")
	var err error
	if o.q.FromMs, err = parseTimeFlag("from", from); err != nil {
		return o, err
	}
	if o.q.ToMs, err = parseTimeFlag("to", to); err != nil {
		return o, err
	}
	if o.q.ToMs != 0 && o.q.ToMs <= o.q.FromMs {
		return o, fmt.Errorf("--to (%s) must be after --from (%s)", to, from)
	}
	o.q.Apps, _ = f.GetStringSlice("app")
	o.q.KeyPrefix, _ = f.GetString("key-prefix")
	o.q.SkipBadFiles, _ = f.GetBool("skip-bad-files")
	o.root, _ = f.GetString("archive")
	o.json, _ = f.GetBool("json")
	o.top, _ = f.GetInt("top")
	o.outParquet, _ = f.GetString("out-parquet")
	o.clickhouse, _ = f.GetBool("clickhouse")
	o.toTopic, _ = f.GetString("to-topic")
	o.progress, _ = f.GetBool("progress")
	speed, _ := f.GetString("speed")
	if o.speed, err = parseSpeed(speed); err != nil {
		return o, err
	}
	if o.toTopic != "" && (o.outParquet != "" || o.clickhouse || o.json) {
		return o, errors.New("--to-topic replays events, not detection: it does not combine with --json, --out-parquet or --clickhouse")
	}
	if o.toTopic == "" && f.Changed("speed") {
		return o, errors.New("--speed paces --to-topic; set --to-topic too")
	}
	return o, nil
}

// parseTimeFlag reads an RFC 3339 time as Unix ms; empty is 0.
func parseTimeFlag(name, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, fmt.Errorf("--%s=%q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", name, v)
	}
	return t.UnixMilli(), nil
}

// parseSpeed reads max or Nx (1x, 10x, 0.5x); max is 0.
func parseSpeed(v string) (float64, error) {
	if v == "max" {
		return 0, nil
	}
	n, err := strconv.ParseFloat(strings.TrimSuffix(v, "x"), 64)
	if err != nil || !strings.HasSuffix(v, "x") || n <= 0 || n > 1e6 {
		return 0, fmt.Errorf("--speed=%q: want max or a positive factor such as 1x or 10x", v)
	}
	return n, nil
}

func runReplay(ctx context.Context, cfg *config.Config, o replayOpts, stdout, stderr io.Writer) error {
	log := cli.NewLogger(cfg.Log, stderr)
	r, err := archive.OpenEvents(ctx, o.root, o.q, log)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer r.Close()
	var prog *progress.Counter
	if o.progress {
		prog = progress.NewCounter(stderr, progress.Terminal(stderr) != nil, "replay", r.Rows())
	}
	defer prog.End()
	if o.toTopic != "" {
		n, err := replayToTopic(ctx, cfg, o, r, prog.Set)
		reportSkipped(log, r.Skipped())
		if err != nil {
			return err
		}
		prog.End()
		log.Info("replay produced", "topic", o.toTopic, "events", n)
		return nil
	}

	var to detect.ReplayTo
	if o.outParquet == "" && !o.clickhouse {
		to.Print = &replayPrinter{w: stdout, json: o.json, top: o.top}
	}
	if o.outParquet != "" {
		// A new folder is made (not its parents: a typo in them is
		// more likely than a wish for a tree).
		if err := os.Mkdir(o.outParquet, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("replay: --out-parquet=%s: %w (its parent folder must exist)", o.outParquet, err)
		}
		opts := cfg.Archive
		opts.Root = o.outParquet
		a, err := archive.Open(ctx, opts, log, nil)
		if err != nil {
			return fmt.Errorf("replay: --out-parquet: %w", err)
		}
		defer a.Close() // idempotent; closed below to see its error
		if to.Reports, err = a.Reports("replay"); err != nil {
			return fmt.Errorf("replay: --out-parquet: %w", err)
		}
		if to.HotKeys, err = a.HotKeys("replay"); err != nil {
			return fmt.Errorf("replay: --out-parquet: %w", err)
		}
		to.Archive, to.ArchiveName = a, "--out-parquet"
	}
	if o.clickhouse {
		w, err := clickhouse.Open(ctx, cfg.ClickHouse.Options, clickhouse.Deps{Logger: log})
		if err != nil {
			return fmt.Errorf("replay: clickhouse: %w", err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Detect.FlushTimeout)
			defer cancel()
			_ = w.Close(cctx) // idempotent; closed below to see its error
		}()
		to.ClickHouse = w
	}
	sinks := detect.NewReplayOutputs(ctx, to)
	rc := detect.ReplayConfig{
		Pipeline:   cfg.Pipeline,
		Merge:      pipeline.MergerConfig{MergerOptions: cfg.Merge, Window: cfg.Pipeline.Window, Lateness: cfg.Pipeline.Lateness, Logger: log},
		Partitions: r.Partitions(),
		Keyed:      cfg.Detect.Keyed,
		Progress:   func(s detect.ReplayStats) { prog.Set(s.Events) },
		Logger:     log,
	}
	st, err := detect.Replay(ctx, r, rc, sinks)
	reportSkipped(log, r.Skipped())
	if err != nil {
		return err
	}
	if err := sinks.Close(ctx, cfg.Detect.FlushTimeout); err != nil {
		return err
	}
	prog.End()
	log.Info("replay done", "events", st.Events, "reports", st.Reports, "hot_key_events", st.HotKeys, "skipped_files", len(r.Skipped()))
	return nil
}

func reportSkipped(log *slog.Logger, skipped []*archive.BadFileError) {
	for _, s := range skipped {
		log.Warn("skipped a bad archive file", "path", s.Path, "err", s.Err)
	}
}

// replayPrinter writes to the terminal what detect run --print would.
type replayPrinter struct {
	w    io.Writer
	json bool
	top  int
	text detect.TextPrinter
	buf  []byte
}

var _ detect.ReplaySink = (*replayPrinter)(nil)

func (p *replayPrinter) HotKey(h *schemas.HotKeyEvent) error {
	if p.json {
		p.buf, _ = h.AppendJSON(p.buf[:0])
		p.buf = append(p.buf, '\n')
	} else {
		p.buf = p.text.AppendHotKey(p.buf[:0], h)
	}
	_, _ = p.w.Write(p.buf)
	return nil
}

func (p *replayPrinter) Report(r *schemas.WindowReport) error {
	if p.json {
		p.buf, _ = r.AppendJSON(p.buf[:0])
		p.buf = append(p.buf, '\n')
	} else {
		p.text.Top = p.top
		p.buf = p.text.AppendReport(p.buf[:0], r)
	}
	if len(p.buf) > 0 {
		_, _ = p.w.Write(p.buf)
	}
	return nil
}

// replayToTopic produces the events r yields to o.toTopic, paced at
// o.speed (package republish), and returns how many Kafka acknowledged.
func replayToTopic(ctx context.Context, cfg *config.Config, o replayOpts, r *archive.EventReader, sent func(int64)) (int64, error) {
	codec, err := schemas.CodecByName(cfg.Events.Codec)
	if err != nil {
		return 0, err
	}
	clientOpts, err := cfg.Kafka.ClientOpts()
	if err != nil {
		return 0, err
	}
	n, err := republish.Run(ctx, r, republish.Config{ClientOpts: clientOpts, Topic: o.toTopic, Setting: "--to-topic",
		CreateTopic: cfg.Kafka.CreateTopics, Partitions: int32(cfg.Kafka.Partitions), ReplicationFactor: int16(cfg.Kafka.ReplicationFactor),
		Codec: codec, Speed: o.speed, Progress: sent})
	if err != nil {
		return n, fmt.Errorf("replay: %w", err)
	}
	return n, nil
}
