package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/internal/ackseq"
	"github.com/keyheat/keyheat/internal/topics"
	"github.com/keyheat/keyheat/schemas"
)

// TopicOptions are the topic source's settings a config file sets (under
// ingest.topic:, by their mapstructure tags). DefaultTopicOptions has the
// defaults; NewTopic takes a zero Group or CommitInterval as the default.
type TopicOptions struct {
	// Topics are the raw log topics to read. Each record's value is one
	// line (a trailing newline is dropped) or one JSON object, parsed by
	// the line sender's format. They may be partitioned any way.
	Topics []string `mapstructure:"topics"`
	// Group is the consumer group whose committed offsets say where
	// reading resumes.
	Group string `mapstructure:"group"`
	// CommitInterval is how often acknowledged offsets are committed while
	// reading. It is also the most a crash can re-send.
	CommitInterval time.Duration `mapstructure:"commit_interval"`
}

// DefaultTopicOptions: no topics, group keyheat-ingest, a commit every
// second.
func DefaultTopicOptions() TopicOptions {
	return TopicOptions{Group: "keyheat-ingest", CommitInterval: time.Second}
}

// Validate returns every unusable option, each an *OptionError, joined.
// An empty Topics is valid here (NewTopic needs one); zero values are
// checked as they are, not as NewTopic would fill them.
func (o TopicOptions) Validate() error {
	var p optionErrors
	seen := map[string]bool{}
	for _, t := range o.Topics {
		switch err := topics.CheckName(t); {
		case err != nil:
			p.add("topics", "%v", err)
		case seen[t]:
			p.add("topics", "%q is named twice", t)
		}
		seen[t] = true
	}
	if err := topics.CheckName(o.Group); err != nil {
		// Kafka is laxer about group ids, but a group named like a topic
		// survives every tool and ACL syntax.
		p.add("group", "%v", err)
	}
	if o.CommitInterval <= 0 {
		p.add("commit_interval", "must be positive, e.g. 1s")
	}
	return p.err()
}

func (o TopicOptions) withDefaults() TopicOptions {
	def := DefaultTopicOptions()
	if o.Group == "" {
		o.Group = def.Group
	}
	if o.CommitInterval == 0 {
		o.CommitInterval = def.CommitInterval
	}
	return o
}

// TopicConfig configures a Topic source: its options and what it runs
// with.
type TopicConfig struct {
	TopicOptions
	// ClientOpts connect to the brokers holding the raw topics
	// (config.Kafka.ClientOpts); group options are added by NewTopic.
	ClientOpts []kgo.Opt
	// MaxPollRecords bounds the records handled between two chances to
	// rebalance; default 10000.
	MaxPollRecords int
	// FlushTimeout bounds the flush before a revoke's commit; default 30s.
	FlushTimeout time.Duration
	// StopTimeout bounds the wait for Kafka once Run's ctx ended
	// (DeliveryOptions.StopTimeout); Force, when closed, ends it at once.
	StopTimeout time.Duration
	Force       <-chan struct{}
	// Health, when set, learns from the consumer whether Kafka answers.
	Health *KafkaHealth
	// Logger; nil discards.
	Logger *slog.Logger
}

// Topic re-publishes the records of raw log topics as keyed events. It is
// a consumer group member: any number of processes may share the work.
//
// Offsets are committed per partition only up to the contiguous run of
// records whose events (or dead letters) Kafka acknowledged, never the
// last polled offset. Records are handled between a poll and
// AllowRebalance (kgo.BlockRebalanceOnPoll), so a rebalance callback never
// runs while records are being sent. On revoke it flushes the producer and
// commits the revoked partitions' watermark before they move; on a lost
// partition (the group already moved on) it commits nothing, and the new
// owner re-sends from the last commit with the same keyheat-id headers (schemas.RecordID).
type Topic struct {
	cfg TopicConfig
	pl  *LineSender
	log *slog.Logger
	cl  *kgo.Client

	// mu guards parts. The poll loop and the rebalance callbacks already
	// exclude each other (BlockRebalanceOnPoll); the lock is for Run's
	// final commit racing a callback of Close.
	mu    sync.Mutex
	parts map[topicPartition]*partAcks

	closeOnce sync.Once
}

type topicPartition struct {
	topic     string
	partition int32
}

// partAcks is one assigned partition's acknowledgement watermark.
type partAcks struct {
	acks      *ackseq.Seq
	idPrefix  string // schemas.RecordID.Prefix of the partition
	source    string // "topic:partition" for dead letters
	committed int64  // last committed offset, -1 for none
}

// NewTopic validates cfg and creates the group consumer. It does not
// contact the brokers yet.
func NewTopic(cfg TopicConfig, pl *LineSender) (*Topic, error) {
	if pl == nil {
		return nil, errors.New("topic source: line sender must be set")
	}
	cfg.TopicOptions = cfg.TopicOptions.withDefaults()
	errs := []error{cfg.TopicOptions.Validate()}
	if len(cfg.Topics) == 0 {
		errs = append(errs, errors.New("no topics to read"))
	}
	for _, t := range cfg.Topics {
		if t == pl.prod.topic || t == pl.prod.dlq {
			// Reading what we write would re-publish every event forever.
			errs = append(errs, fmt.Errorf("topic %s is an output topic; read a raw log topic", t))
		}
	}
	if cfg.MaxPollRecords < 0 || cfg.FlushTimeout < 0 || cfg.StopTimeout < 0 {
		errs = append(errs, errors.New("max poll records, flush and stop timeouts must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("topic source: %w", err)
	}
	if cfg.MaxPollRecords == 0 {
		cfg.MaxPollRecords = 10_000
	}
	if cfg.FlushTimeout == 0 {
		cfg.FlushTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Topic{cfg: cfg, pl: pl, log: cfg.Logger, parts: map[topicPartition]*partAcks{}}
	opts := append([]kgo.Opt{}, cfg.ClientOpts...)
	opts = append(opts,
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), // a new group reads what the topic holds
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
	)
	opts = append(opts, clientLogOpts(cfg.Logger, cfg.Health)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("topic source: kafka client: %w", err)
	}
	s.cl = cl
	return s, nil
}

// Run reads until ctx ends or a record fails. Then it stops reading,
// waits for Kafka to take what was sent (at most StopTimeout, or until
// Force), commits the acknowledged offsets, leaves the group and returns:
// nil when everything read was delivered, an *UndeliveredError when
// records read are not on Kafka (the group's committed offsets sit before
// them, so the next start reads and sends them again, with the same
// keyheat-id).
func (s *Topic) Run(ctx context.Context) error {
	defer s.Close()
	var runErr error
	lastCommit := time.Now()
	for ctx.Err() == nil {
		fs := s.cl.PollRecords(ctx, s.cfg.MaxPollRecords)
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			// franz-go retries what it can; what reaches us (an
			// authorization failure, a deleted topic) needs a person.
			s.log.Error("fetch", "topic", t, "partition", p, "err", err)
		})
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if runErr != nil || len(ftp.Records) == 0 {
				return
			}
			pa := s.part(ftp.Topic, ftp.Partition, ftp.Records[0].Offset)
			for _, r := range ftp.Records {
				if err := s.send(ctx, pa, r); err != nil {
					if ctx.Err() == nil {
						runErr = err
					}
					return
				}
			}
		})
		if runErr == nil {
			runErr = s.failed()
		}
		if runErr == nil && time.Since(lastCommit) >= s.cfg.CommitInterval {
			// Committed between poll and AllowRebalance, so we still own
			// every partition we commit. Not under ctx: a stop signal
			// must not cut a commit off half way for nothing.
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.FlushTimeout)
			s.commit(cctx, nil)
			ccancel()
			lastCommit = time.Now()
		}
		s.cl.AllowRebalance()
		if runErr != nil {
			break
		}
	}
	// Stop: what was sent is flushed and its acknowledged prefix committed
	// while we still own the partitions. Close then leaves the group; the
	// revoke callback it triggers finds nothing new to commit.
	giveUp, cancelGiveUp := giveUpContext(ctx, s.cfg.StopTimeout, s.cfg.Force)
	defer cancelGiveUp()
	if runErr != nil {
		cancelGiveUp() // a record failed: nothing past it can be committed anyway
	}
	flushed := s.pl.Producer().Flush(giveUp) == nil
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.FlushTimeout)
	defer cancel()
	s.commit(cctx, nil)
	if runErr == nil {
		runErr = s.failed()
	}
	if !flushed {
		s.pl.prod.abandon()
		_ = s.pl.Producer().Flush(cctx) // every promise has run: the counts are final
	}
	if n := s.pl.stats.Waiting(); n > 0 {
		s.pl.stats.Undelivered.Add(n)
		runErr = errors.Join(runErr, &UndeliveredError{Lines: n,
			Resume: "the consumer group's committed offsets are before them, so the next start reads and sends them again (same keyheat-id)"})
	}
	return runErr
}

// Close leaves the group and closes the consumer; Run calls it. It is
// idempotent.
func (s *Topic) Close() { s.closeOnce.Do(s.cl.Close) }

// part returns the watermark of a partition, starting it at first, the
// offset of the first record polled since it was assigned: that is where
// the group's committed offset put us, so nothing before it is pending.
func (s *Topic) part(topic string, partition int32, first int64) *partAcks {
	tp := topicPartition{topic, partition}
	s.mu.Lock()
	defer s.mu.Unlock()
	pa := s.parts[tp]
	if pa == nil {
		pa = &partAcks{acks: ackseq.New(first), source: topic + ":" + strconv.FormatInt(int64(partition), 10), committed: -1,
			idPrefix: schemas.RecordID{Kind: schemas.IDTopic, Topic: topic, Partition: partition}.Prefix()}
		s.parts[tp] = pa
	}
	return pa
}

func (s *Topic) send(ctx context.Context, pa *partAcks, r *kgo.Record) error {
	data := bytes.TrimSuffix(bytes.TrimSuffix(r.Value, []byte{'\n'}), []byte{'\r'})
	l := Line{Data: data, Source: pa.source, SourceAtOffset: true, IDPrefix: pa.idPrefix, Offset: r.Offset,
		ArrivalMs: r.Timestamp.UnixMilli()}
	if maxL := s.pl.MaxLineBytes(); len(data) > maxL {
		l.Data = data[:maxL]
		l.Err = tooLongErr(fmt.Sprintf("record value is %d bytes, more than %d", len(data), maxL))
	}
	return s.pl.Send(ctx, &l, seqAcker{seq: pa.acks, stats: s.pl.stats}, pa.acks.Add(r.Offset+1))
}

// failed returns the first produce error of any partition: Kafka refused
// a record for good, so its partition's watermark is frozen below it and
// reading on would only pile up records that can never be committed.
func (s *Topic) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tp, pa := range s.parts {
		if _, err := pa.acks.Acked(); err != nil && refused(err) {
			return fmt.Errorf("kafka refused an event of %s:%d: %w", tp.topic, tp.partition, err)
		}
	}
	return nil
}

// commit commits, synchronously, the acknowledged watermark of every
// partition in only (all assigned ones when only is nil) that moved since
// its last commit.
func (s *Topic) commit(ctx context.Context, only map[string][]int32) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	s.mu.Lock()
	add := func(tp topicPartition, pa *partAcks) {
		wm, _ := pa.acks.Acked()
		if wm <= pa.committed {
			return
		}
		if offsets[tp.topic] == nil {
			offsets[tp.topic] = map[int32]kgo.EpochOffset{}
		}
		// Epoch -1: the watermark's record may be older than the latest
		// leader epoch we saw, and -1 skips the broker's epoch fencing.
		offsets[tp.topic][tp.partition] = kgo.EpochOffset{Epoch: -1, Offset: wm}
	}
	if only == nil {
		for tp, pa := range s.parts {
			add(tp, pa)
		}
	} else {
		for t, ps := range only {
			for _, p := range ps {
				if pa := s.parts[topicPartition{t, p}]; pa != nil {
					add(topicPartition{t, p}, pa)
				}
			}
		}
	}
	s.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	s.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			s.log.Error("commit offsets", "err", err)
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					s.log.Error("commit offset", "topic", t.Topic, "partition", p.Partition, "err", err)
					continue
				}
				tp := topicPartition{t.Topic, p.Partition}
				o := offsets[t.Topic][p.Partition].Offset
				if pa := s.parts[tp]; pa != nil {
					pa.committed = o
				}
			}
		}
	})
}

// onRevoked runs while no records are being sent (BlockRebalanceOnPoll):
// everything sent for a revoked partition is already in the producer.
// Flush makes Kafka acknowledge it, so the commit carries the partition's
// whole progress to its next owner, which then re-sends nothing.
func (s *Topic) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	// ctx is the client's and ends when it closes, which is exactly when
	// the final revoke must still commit.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.FlushTimeout)
	defer cancel()
	if err := s.pl.Producer().Flush(fctx); err != nil {
		s.log.Error("flush before revoke", "err", err)
	}
	s.commit(fctx, revoked)
	s.drop(revoked)
}

// onLost drops the partitions without committing: another member may
// already own them and have committed further; our commit could move
// their offset back. Acks still arriving for them go to the dropped
// watermarks and are forgotten.
func (s *Topic) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.log.Warn("partitions lost; not committing them", "partitions", lost)
	s.drop(lost)
}

func (s *Topic) drop(ps map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, parts := range ps {
		for _, p := range parts {
			delete(s.parts, topicPartition{t, p})
		}
	}
}
