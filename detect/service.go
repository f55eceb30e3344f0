package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect/internal/member"
	"github.com/keyheat/keyheat/internal/deadletters"
	"github.com/keyheat/keyheat/internal/kgolog"
	"github.com/keyheat/keyheat/internal/topics"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// OutputTopics name the topics the service reads and writes besides the
// events topics it consumes.
type OutputTopics struct {
	// Events is the events topic read when Options.Topics is empty.
	Events string
	// DLQ receives dead letters of records that could not be used.
	DLQ string
	// Hotkeys is the compacted registry of hot keys.
	Hotkeys string
	// Windows carries the partitions' window summaries to the merger; it
	// must have exactly one partition.
	Windows string
	// Reports receives the merged window reports.
	Reports string
	// Progress is the small compacted topic every instance writes its
	// partitions' progress to and follows (schemas.Progress); it must
	// have exactly one partition.
	Progress string
	// ClientStats, when set, is created with the others (compacted, and
	// deleted after a day: a client's id never comes back after its
	// restart) for applications' hotkeys.StatsPublisher; detect only
	// makes it (the operator API reads it).
	ClientStats string
}

// ClickHouseSink is what the service writes to ClickHouse: hot-key events
// and window reports, each acknowledged once it is in.
type ClickHouseSink interface {
	WriteHotKey(ctx context.Context, h *schemas.HotKeyEvent, ack clickhouse.AckFunc) error
	WriteReport(ctx context.Context, r *schemas.WindowReport, ack clickhouse.AckFunc) error
	Ready() error
}

var _ ClickHouseSink = (*clickhouse.Writer)(nil)

// Config configures a Service: its options and what it runs with.
type Config struct {
	Options
	// ClientOpts connect to the brokers (config.Kafka.ClientOpts); the
	// service adds its consumer and producer options. A decompressor
	// (kgo.WithDecompressor) must return memory it does not reuse:
	// without an archive, a binary event's strings point into its
	// record's value while the record is handled.
	ClientOpts []kgo.Opt
	Topics     OutputTopics
	// CreateTopics creates missing output topics at start with
	// Partitions and ReplicationFactor (the windows topic with one
	// partition, the hot-key registry compacted); otherwise a missing
	// topic is an error at start. The events topics read are never
	// created: a missing one is a *MissingInputError.
	CreateTopics      bool
	Partitions        int32
	ReplicationFactor int16
	// Limits dead-letter events that fail them.
	Limits schemas.Limits
	// ExitAtEnd reads every partition this instance is assigned up to the
	// end offsets seen when it is assigned, closes every window, lets the
	// merger report them, commits, and makes Run return nil (or a
	// *NothingDetectedError when no record read gave an event and some
	// went to the DLQ): a batch run for backfills and checks. Idle
	// partitions are never advanced by the wall clock in this mode, so
	// the output depends only on the input.
	ExitAtEnd bool
	// Print, when set, receives every hot-key event and window report as
	// it is produced, formatted as PrintFormat (PrintText or PrintJSON).
	Print       io.Writer
	PrintFormat string
	// Pipeline configures each partition's detection core
	// (pipeline.NewPartition); its rules can be replaced while running
	// (Reload). The report window must be the merger's.
	Pipeline pipeline.Options
	// Merge, when set, makes this instance a candidate merger: while the
	// merge group gives it the windows topic, it merges with a
	// pipeline.Merger built from Merge, whose Topics, DoneThroughMs and
	// Registerer the service sets, and whose Threshold and SplitCapacity,
	// when unset, follow the pipeline's rules in force and split capacity.
	// Nil runs no merger (another process merges).
	Merge *pipeline.MergerConfig
	// ClickHouse, when set, receives hot-key events and window reports;
	// offsets pass an output only once ClickHouse has it too.
	ClickHouse ClickHouseSink
	// Archive, when set, receives every event and every hot-key event and
	// report; offsets pass an event only once its segment is durable.
	Archive *archive.Archive
	// ArchiveFlush is how often hot-key events and reports waiting in the
	// archive's buffers are made durable so their commits can pass; the
	// archive's segment age is a good value (commits wait for it anyway).
	ArchiveFlush time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// LogRawKeys shows access keys themselves in log lines, beside their
	// key_hash; off, a line shows a key by its key_hash only (see
	// internal/keylog). Print is not a log and always shows keys.
	LogRawKeys bool
	// Registerer receives the service's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// validate checks cfg and fills what has a default.
func (c *Config) validate() error {
	errs := []error{c.Options.Validate()}
	for _, t := range []struct{ what, name string }{{"DLQ", c.Topics.DLQ}, {"hotkeys", c.Topics.Hotkeys},
		{"windows", c.Topics.Windows}, {"reports", c.Topics.Reports}, {"progress", c.Topics.Progress}} {
		if err := topics.CheckName(t.name); err != nil {
			errs = append(errs, fmt.Errorf("%s topic: %w", t.what, err))
		}
	}
	if len(c.Options.Topics) == 0 {
		if err := topics.CheckName(c.Topics.Events); err != nil {
			errs = append(errs, fmt.Errorf("events topic: %w", err))
		}
	}
	if err := c.Pipeline.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Merge != nil && c.Merge.Window != c.Pipeline.Window {
		errs = append(errs, fmt.Errorf("merger window %v differs from the partitions' %v", c.Merge.Window, c.Pipeline.Window))
	}
	if c.CreateTopics && (c.Partitions < 1 || c.ReplicationFactor == 0 || c.ReplicationFactor < -1) {
		errs = append(errs, errors.New("partitions must be at least 1 and replication factor -1 or at least 1 to create topics"))
	}
	if c.PrintFormat != "" && c.PrintFormat != PrintText && c.PrintFormat != PrintJSON {
		errs = append(errs, fmt.Errorf("print format %q: want text or json", c.PrintFormat))
	}
	if c.Archive != nil && c.ArchiveFlush <= 0 {
		errs = append(errs, errors.New("archive flush interval must be positive with an archive"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("detect: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// eventTopics returns the events topics, or the expressions, read.
func (c *Config) eventTopics() []string {
	if len(c.Options.Topics) > 0 {
		return c.Options.Topics
	}
	return []string{c.Topics.Events}
}

// Service is keyheat's running detection: a member of the detect
// consumer group with one goroutine per assigned events partition, which
// decodes records, dead-letters bad ones, feeds the detection core,
// publishes its hot keys and window summaries at once, and commits what
// the core and the sinks allow; and a member of the merge group, which
// merges the summaries into reports when Kafka elects this instance.
//
// See doc.go for the delivery argument.
type Service struct {
	cfg    Config
	log    *slog.Logger
	m      *metrics
	parser logparse.Parser // nil: AccessEvent records
	print  *printer
	reset  kgo.Offset
	now    func() time.Time

	out *kgo.Client // producer of every output
	// cons is the detect group's consumer (consumer()): set by Run, or
	// first by the assignment callback, which may run before NewClient
	// returns and starts the workers that pause and resume through it.
	cons atomic.Pointer[kgo.Client]
	// pauses are the partitions whose fetching cons has paused, and why
	// (a worker behind, or at its end).
	pauses member.Pauses
	adm    *kadm.Client

	rules    atomic.Pointer[pipeline.Rules] // in force
	rulesGen atomic.Uint64                  // reloads so far

	// mu guards parts and counts. The poll loop and the group callbacks
	// exclude each other already (kgo.BlockRebalanceOnPoll) except the
	// offsets-fetched callback, which may run while the loop polls.
	mu     sync.Mutex
	parts  map[tp]*partWorker
	counts map[string]int32 // partition counts of events topics
	joined bool             // assigned at least once (maybe nothing)
	// finished ends, in an ExitAtEnd run, once every partition ended; it
	// also cuts the poll waiting for records that will not come short.
	finished context.Context
	finish   context.CancelFunc
	// room holds a token when a worker took a batch (see waitRoom).
	room chan struct{}
	// nothingToDo: ExitAtEnd, assigned nothing while the group is stable
	// and every partition is another member's (see checkIdle).
	nothingToDo   bool
	lastIdleCheck time.Time // poll loop only

	// inst is the static membership both groups are joined with (Run
	// resolves Options.InstanceID).
	inst instance
	// fenced: a member with our instance id fenced us out; the id is
	// not ours to leave with any more.
	fenced atomic.Bool

	// committer commits the detect group's partitions.
	committer *member.Committer

	merge *mergeRunner
	// atMergerEnd, a test's hook (export_test.go), runs in an ExitAtEnd
	// merger's end check between its drain and its commit; nil otherwise.
	atMergerEnd func(*kgo.Client)
	// holdClose, a test's hook (export_test.go), holds the closing of
	// both groups' clients until it is closed; nil otherwise.
	holdClose <-chan struct{}
	// board follows the progress topic; align keeps the partitions held
	// here in step with every other (both set by Run).
	board *board
	align *aligner

	// read counts what the partitions read and dead-lettered, for the
	// logs (see logDeadLetters, logRead).
	read readStats
	// keyedLog says what detect.keyed decided, once per topic.
	keyedLog *keyedLog

	failOnce sync.Once
	failErr  error
	failed   chan struct{}

	closeOnce sync.Once
}

type tp struct {
	topic     string
	partition int32
}

// New validates cfg and builds the service. It does not contact the
// brokers; Run does.
func New(cfg Config) (*Service, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	reset, _ := cfg.Options.resetOffset() // validated
	s := &Service{
		cfg:    cfg,
		log:    cfg.Logger,
		print:  newPrinter(cfg.Print, cfg.PrintFormat),
		reset:  reset,
		now:    time.Now,
		parts:  map[tp]*partWorker{},
		counts: map[string]int32{},
		failed: make(chan struct{}),
		room:   make(chan struct{}, 1),
	}
	s.keyedLog = newKeyedLog(s.log, cfg.Keyed, cfg.LogRawKeys)
	s.finished, s.finish = context.WithCancel(context.Background())
	if cfg.Parse.Format != "" {
		p, err := logparse.New(cfg.Parse)
		if err != nil {
			return nil, fmt.Errorf("detect: %w", err)
		}
		s.parser = p
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("detect: register metrics: %w", err)
	}
	s.m = m
	s.committer = member.NewCommitter(member.CommitterConfig{Logger: s.log, RequestMsg: "commit offsets", PartitionMsg: "commit offset",
		OK: m.commits.WithLabelValues("detect", "ok"), Failed: m.commits.WithLabelValues("detect", "error")})
	rules, err := pipeline.NewRules(cfg.Pipeline)
	if err != nil {
		return nil, fmt.Errorf("detect: %w", err)
	}
	s.rules.Store(rules)
	s.m.rulesLoaded.Set(float64(s.now().Unix()))
	opts := append([]kgo.Opt{
		// Idempotent (franz-go's default), so a retried batch is never
		// written twice and order per partition holds: the merger relies
		// on a partition's summaries arriving in order.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// Hot keys are published the moment they are found; waiting to
		// fill a batch would only add to the alert's delay.
		kgo.ProducerLinger(0),
		// Snappy, not zstd: what detect writes comes a record or a few to
		// a batch (a window's summary or report, a hot key), for which
		// zstd's fixed cost per batch dominates; at sparse windows it was
		// a tenth of detect's CPU for a window's six records. Snappy
		// costs a tenth as much, and leaves them about twice as large.
		kgo.ProducerBatchCompression(kgo.SnappyCompression()),
		kgo.MaxBufferedRecords(maxBufferedRecords),
		kgo.ProducerBatchMaxBytes(maxRecordBytes),
		kgo.WithLogger(kgolog.New(cfg.Logger, kgolog.WarnAndAbove())),
	}, cfg.ClientOpts...)
	out, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("detect: kafka client: %w", err)
	}
	s.out = out
	s.adm = kadm.NewClient(out)
	return s, nil
}

// Reload replaces the rules, whitelist and operation lists with those of
// o, which must equal the running options in everything else (sizes,
// windows: those need a restart). Every partition swaps them in between
// two events, keeping its counts (see pipeline.Partition.SetRules), and
// the merger's advice follows them. On an error nothing changes.
func (s *Service) Reload(o pipeline.Options) error {
	want, got := s.cfg.Pipeline, o
	want.RuleSet, got.RuleSet = pipeline.RuleSet{}, pipeline.RuleSet{}
	if !reflect.DeepEqual(want, got) {
		s.m.reloads.WithLabelValues("refused").Inc()
		return errors.New("only rules, whitelist, read_ops and write_ops reload while running; restart for the other pipeline settings")
	}
	r, err := pipeline.NewRules(o)
	if err != nil {
		s.m.reloads.WithLabelValues("refused").Inc()
		return err
	}
	s.rules.Store(r)
	s.rulesGen.Add(1)
	s.m.reloads.WithLabelValues("applied").Inc()
	s.m.rulesLoaded.Set(float64(s.now().Unix()))
	return nil
}

// check validates an event read from a record produced at producedMs
// (its Kafka timestamp), at nowMs. An ExitAtEnd run judges its time
// against when the record was produced (schemas.Limits.ValidateProduced):
// its windows close by its input alone, so a topic read long after it was
// written, or old logs ingested today, are a backfill like any other. A
// live run judges it against the wall clock (schemas.Limits.Validate), as
// ingest does: its idle partitions' clocks move to the wall clock
// (pipeline.Partition.IdleTo), and a partition whose events were months
// old would close, and hold in memory, every window between them and now.
func (s *Service) check(e *schemas.AccessEvent, producedMs, nowMs int64) error {
	if s.cfg.ExitAtEnd {
		return s.cfg.Limits.ValidateProduced(e, producedMs, nowMs)
	}
	return s.cfg.Limits.Validate(e, nowMs)
}

// fix says what fixes dead letters of reason r (deadletters.Fix), with
// what a live run's clock check asks for instead.
func (s *Service) fix(r schemas.Reason) string {
	if r == schemas.ReasonTimeSkew && !s.cfg.ExitAtEnd {
		return "a live run refuses event times further than events.max_skew from its clock: read a backfill of old events with --exit-at-end, " +
			"which judges them by when their records were produced; or check the time's unit (detect.json.time_format, detect.regex.time_format)"
	}
	return deadletters.Fix(r, "detect")
}

// threshold is the merger's advice threshold: the rules in force.
func (s *Service) threshold(app, key string) (float64, bool) {
	return s.rules.Load().Threshold(app, key)
}

// Ready reports whether the service works as it should: nil once it
// joined its group, while no sink is retrying; an error saying what is
// wrong otherwise. It is what /readyz serves.
func (s *Service) Ready() error {
	select {
	case <-s.failed:
		return s.failErr
	default:
	}
	s.mu.Lock()
	joined := s.joined
	s.mu.Unlock()
	if !joined {
		return fmt.Errorf("not yet a member of consumer group %s", s.cfg.Group)
	}
	if ch := s.cfg.ClickHouse; ch != nil {
		if err := ch.Ready(); err != nil {
			return err
		}
	}
	return nil
}

// fail records the first fatal error and stops the service: an output
// Kafka or a sink refused for good can never be committed past, so
// reading on would only pile up work a restart must redo.
func (s *Service) fail(err error) {
	s.failOnce.Do(func() {
		s.failErr = err
		close(s.failed)
		s.log.Error("stopping", "err", err)
	})
}

// Run consumes until ctx ends, a fatal error, or, with ExitAtEnd, the end
// of the input. It then gives up its partitions as a revoke does (waits
// for outputs in flight, commits) and leaves its groups. A stop by ctx or
// the end of the input returns nil, except that an ExitAtEnd run whose
// records gave no event while some went to the DLQ returns a
// *NothingDetectedError. While it runs it logs what went to the DLQ when
// more did, and at the end what it read and dead-lettered.
func (s *Service) Run(ctx context.Context) error {
	defer s.Close()
	if err := s.ensureTopics(ctx); err != nil {
		return err
	}
	b, err := newBoard(s)
	if err != nil {
		return err
	}
	s.board = b
	if s.cfg.PartitionTimeout <= s.cfg.SessionTimeout {
		s.log.Warn("detect.partition_timeout is not longer than detect.session_timeout: a crashed instance's partitions are given up on (their windows reported partial) before the group gives them to another instance",
			"partition_timeout", s.cfg.PartitionTimeout, "session_timeout", s.cfg.SessionTimeout)
	}
	mo := pipeline.DefaultMergerOptions()
	if s.cfg.Merge != nil {
		mo = s.cfg.Merge.MergerOptions
	}
	s.align = newAligner(s.cfg.Pipeline.Window.Milliseconds(), mo.AlignWindows(), b)
	for t, n := range s.eventCounts() {
		s.align.counts[t] = n
	}
	b.changed = s.align.wake
	inst, why := resolveInstance(s.cfg.Options)
	s.inst = inst
	defer inst.release()
	switch {
	case inst.id != "":
		s.log.Info("static group membership: a restart with this id takes its partitions back at once", "instance_id", inst.id,
			"groups", []string{s.cfg.Group, s.cfg.MergeGroup})
	case why != "":
		s.log.Warn("detect.instance_id auto found no id; running without static membership, so a restart after a crash waits for the dead member's session timeout",
			"reason", why, "session_timeout", s.cfg.SessionTimeout)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := kgo.NewClient(s.consumerOpts()...)
	if err != nil {
		b.cl.Close()
		return fmt.Errorf("detect: kafka consumer: %w", err)
	}
	s.cons.Store(cons)
	// The board runs until every other part stopped: partitions send
	// their progress through to their release, and the merger reads it.
	boardCtx, stopBoard := context.WithCancel(context.WithoutCancel(ctx))
	boardDone := make(chan struct{})
	go func() {
		defer close(boardDone)
		b.run(boardCtx)
	}()
	defer func() {
		stopBoard()
		<-boardDone
	}()
	stopLog := s.logDeadLetters(ctx)
	defer stopLog()
	var mergeDone chan error
	if s.cfg.Merge != nil {
		mr, err := newMergeRunner(s)
		if err != nil {
			cons.Close()
			return err
		}
		s.merge = mr
		mergeDone = make(chan error, 1)
		go func() { mergeDone <- mr.run(runCtx) }()
	}
	err = s.poll(runCtx)
	s.waitHoldClose()
	// Close leaves the group: its revoke callback stops every partition,
	// waits for their outputs and commits them. A static member is not
	// left by Close: leaveGroup does it.
	cons.Close()
	s.leaveGroup(s.cfg.Group)
	if s.merge != nil {
		if err == nil && s.cfg.ExitAtEnd && ctx.Err() == nil {
			// Other instances of an exit-at-end run may still be reading
			// their partitions: the merger reports once they are done too
			// (they leave the group when they are), so no window goes out
			// partial for want of their summaries.
			s.waitGroupDone(ctx)
			if ctx.Err() == nil {
				s.merge.endInput(s.windowsEnd(ctx))
			} else {
				cancel()
			}
		} else {
			cancel()
		}
		err = errors.Join(err, <-mergeDone)
		s.leaveGroup(s.cfg.MergeGroup)
	}
	stopLog()
	rerr := s.logRead()
	select {
	case <-s.failed:
		return s.failErr
	default:
	}
	if err == nil && ctx.Err() == nil {
		err = rerr
	}
	return err
}

// waitHoldClose waits for a test that holds the clients' close
// (holdClose).
func (s *Service) waitHoldClose() {
	if s.holdClose != nil {
		<-s.holdClose
	}
}

// consumer is the detect group's consumer, nil before Run made it.
func (s *Service) consumer() *kgo.Client { return s.cons.Load() }

// Close releases the producer, flushing what it holds for at most
// FlushTimeout. Run calls it; calling it again does nothing.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.FlushTimeout)
		defer cancel()
		_ = s.out.Flush(ctx)
		s.out.Close()
	})
}

// consumerOpts are the detect group's client options.
func (s *Service) consumerOpts() []kgo.Opt {
	opts := []kgo.Opt{
		// A fetch waits this long at most for partitions with nothing new,
		// and franz-go has one fetch in flight per broker: a partition
		// resumed (see partWorker.enqueue) while the others of its broker
		// are idle gets its records after that wait, not after the
		// default 5 s. A few empty fetches a second on an idle topic cost
		// nothing. ClientOpts may set another.
		kgo.FetchMaxWait(fetchMaxWait),
	}
	opts = append(opts, s.cfg.ClientOpts...)
	opts = append(opts, member.GroupConfig{Group: s.cfg.Group, Topics: s.cfg.eventTopics(), Regex: s.cfg.RegexTopics,
		Reset: s.reset, SessionTimeout: s.cfg.SessionTimeout, InstanceID: s.inst.id, Logger: s.log,
		OnFenced: func(err error) { s.checkFenced(s.cfg.Group, err) },
		Fenced:   s.fenced.Load,
		Handler:  member.Funcs{OnAssigned: s.onAssigned, OnFetched: s.onFetched, OnRevoked: s.onRevoked, OnLost: s.onLost},
	}.Opts()...)
	// Control records are kept (and skipped) so a partition's position
	// passes a transaction's last marker: with --exit-at-end the end
	// offset may be one.
	opts = append(opts, kgo.KeepControlRecords())
	return opts
}

// ensureTopics makes sure the output topics exist (creating them when
// allowed), that the events topics read exist, and that the windows topic
// has one partition; it is also the first contact with the brokers.
//
// The events topics are never created, whatever CreateTopics says: a
// topic created from a typo in detect.topics would be read, empty, for
// ever (and an ExitAtEnd run would end at once, "successfully"). No client
// of the service sets kgo.AllowAutoTopicCreation either, so a broker's
// auto.create.topics.enable cannot create them through metadata requests.
func (s *Service) ensureTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	noAnswer := func(err error) error {
		return fmt.Errorf("no answer from the brokers within 30s (is kafka.brokers right, and TLS/SASL set as they expect?): %w", err)
	}
	spec := func(name string, parts int32, cfg map[string]string) topics.Spec {
		return topics.Spec{Name: name, Partitions: parts, ReplicationFactor: s.cfg.ReplicationFactor, Configs: cfg}
	}
	t := s.cfg.Topics
	big := map[string]string{"max.message.bytes": strconv.Itoa(maxRecordBytes)}
	specs := []topics.Spec{spec(t.DLQ, s.cfg.Partitions, nil), spec(t.Hotkeys, s.cfg.Partitions, map[string]string{"cleanup.policy": "compact"}),
		spec(t.Windows, 1, big), spec(t.Reports, s.cfg.Partitions, big), spec(t.Progress, 1, progressTopicConfig)}
	if t.ClientStats != "" {
		specs = append(specs, spec(t.ClientStats, 1, map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "86400000"}))
	}
	if err := topics.Ensure(ctx, s.out, s.cfg.CreateTopics, specs...); err != nil {
		if ctx.Err() != nil {
			return noAnswer(err)
		}
		return err
	}
	if s.cfg.RegexTopics {
		if err := s.checkRegexTopics(ctx); err != nil {
			if ctx.Err() != nil {
				return noAnswer(err)
			}
			return err
		}
	} else {
		var in []topics.Spec
		for _, e := range s.cfg.eventTopics() {
			in = append(in, topics.Spec{Name: e})
		}
		if err := topics.Ensure(ctx, s.out, false, in...); err != nil {
			var me *topics.MissingError
			switch {
			case errors.As(err, &me):
				return &MissingInputError{Topics: me.Topics}
			case ctx.Err() != nil:
				return noAnswer(err)
			}
			return err
		}
	}
	td, err := s.adm.ListTopics(ctx, t.Windows, t.Progress)
	if err != nil {
		return fmt.Errorf("describe topics %s, %s: %w", t.Windows, t.Progress, err)
	}
	if n := len(td[t.Windows].Partitions); n != 1 {
		return fmt.Errorf("topic %s has %d partitions; it must have exactly one, so that one merger sees every summary in order: delete it and let detect create it", t.Windows, n)
	}
	if n := len(td[t.Progress].Partitions); n != 1 {
		return fmt.Errorf("topic %s has %d partitions; it must have exactly one, which every detect instance follows: delete it and let detect create it", t.Progress, n)
	}
	if !s.cfg.RegexTopics {
		for _, e := range s.cfg.eventTopics() {
			if _, err := s.partitionCount(ctx, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// MissingInputError is Run's error when events topics it is to read do
// not exist. Detect never creates its input (see Config.CreateTopics).
type MissingInputError struct {
	Topics []string
}

func (e *MissingInputError) Error() string {
	return fmt.Sprintf("events topics %s do not exist, and detect never creates the topics it reads: check detect.topics (or kafka.topics.events) for a typo, or create them (ingest creates kafka.topics.events when kafka.create_topics is true)",
		strings.Join(e.Topics, ", "))
}

// checkRegexTopics warns when no existing topic matches the detect.topics
// expressions: the group then reads nothing until one is created, which
// is legitimate (a topic created later is picked up) but more often a
// wrong expression.
func (s *Service) checkRegexTopics(ctx context.Context) error {
	td, err := s.adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list kafka topics: %w", err)
	}
	var res []*regexp.Regexp
	for _, e := range s.cfg.Options.Topics {
		re, err := regexp.Compile(e)
		if err != nil {
			return fmt.Errorf("detect.topics %q: %w", e, err)
		}
		res = append(res, re)
	}
	for name := range td {
		for _, re := range res {
			// As kgo.ConsumeRegex matches: anywhere in the name.
			if re.MatchString(name) {
				return nil
			}
		}
	}
	s.log.Warn("no kafka topic matches detect.topics yet; reading nothing until one is created (is the expression right?)",
		"topics", strings.Join(s.cfg.Options.Topics, ", "))
	return nil
}

// partitionCount returns topic's partition count, cached.
func (s *Service) partitionCount(ctx context.Context, topic string) (int32, error) {
	s.mu.Lock()
	n, ok := s.counts[topic]
	s.mu.Unlock()
	if ok {
		return n, nil
	}
	td, err := s.adm.ListTopics(ctx, topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	n = int32(len(td[topic].Partitions))
	s.mu.Lock()
	s.counts[topic] = n
	s.mu.Unlock()
	return n, nil
}

// eventCounts returns the known events topics' partition counts.
func (s *Service) eventCounts() map[string]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int32, len(s.counts))
	for t, n := range s.counts {
		out[t] = n
	}
	return out
}

// waitGroupDone waits until the detect group has no member left, or ctx
// ends.
func (s *Service) waitGroupDone(ctx context.Context) {
	t := time.NewTicker(pollTick)
	defer t.Stop()
	for {
		dg, err := s.adm.DescribeGroups(ctx, s.cfg.Group)
		if err == nil {
			err = dg.Error()
		}
		if err == nil && len(dg[s.cfg.Group].Members) == 0 {
			return
		}
		if err != nil {
			s.log.Warn("describe the detect group; retrying", "group", s.cfg.Group, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// windowsEnd is the windows topic's end offset: in an ExitAtEnd run,
// taken once every partition's summaries were acknowledged, so it covers
// all of them.
func (s *Service) windowsEnd(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.FlushTimeout)
	defer cancel()
	lo, err := s.adm.ListCommittedOffsets(ctx, s.cfg.Topics.Windows)
	if err != nil {
		s.fail(fmt.Errorf("detect: end offset of %s: %w", s.cfg.Topics.Windows, err))
		return 0
	}
	o, _ := lo.Lookup(s.cfg.Topics.Windows, 0)
	return o.Offset
}

// produce hands r to the producer; done hears Kafka's answer. wait
// bounds only the wait for buffer space, which produce does itself: a
// record given to franz-go with a context that is later cancelled fails,
// and with it every record after it in its output partition (franz-go
// keeps a partition's order), and the windows topic's one partition
// carries every events partition's summaries, so one revoked partition's
// cancellation would fail the others'. Once handed over, a record is
// never cancelled; franz-go may still block briefly for space when
// several partitions produce at once.
func (s *Service) produce(wait context.Context, r *kgo.Record, done func(error)) {
	if s.out.BufferedProduceRecords() >= maxBufferedRecords {
		t := time.NewTicker(5 * time.Millisecond)
		for s.out.BufferedProduceRecords() >= maxBufferedRecords && wait.Err() == nil {
			select {
			case <-wait.Done():
			case <-t.C:
			}
		}
		t.Stop()
		if err := wait.Err(); err != nil {
			done(err)
			return
		}
	}
	r.Context = context.Background()
	s.out.Produce(context.Background(), r, func(_ *kgo.Record, err error) { done(err) })
}

// progressTopicConfig: the progress topic keeps each key's latest record
// (compact) and nothing older than an hour (delete): every holder of a
// partition sends it again each beat, and a reader starts at twice the
// partition timeout back. Short segments let both happen.
var progressTopicConfig = map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "3600000", "segment.ms": "600000"}

// maxRecordBytes bounds a window summary or report record: a summary
// carries per app a distinct-key sketch (16 KiB at the default precision),
// its top keys and up to 16,384 slot counts, so a busy window of several
// apps passes Kafka's default 1 MB. The windows and reports topics are
// created allowing it; existing ones keep their max.message.bytes.
const maxRecordBytes = 16 << 20

// maxBufferedRecords bounds the outputs in flight: past it, producing
// waits (backpressure on the partitions).
const maxBufferedRecords = 10_000

// sortedParts returns the workers in a stable order, for logs and tests.
func sortedParts(m map[tp]*partWorker) []*partWorker {
	ws := make([]*partWorker, 0, len(m))
	for _, w := range m {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *partWorker) int {
		if a.tp.topic != b.tp.topic {
			if a.tp.topic < b.tp.topic {
				return -1
			}
			return 1
		}
		return int(a.tp.partition - b.tp.partition)
	})
	return ws
}
