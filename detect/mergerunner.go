package detect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect/internal/ledger"
	"github.com/keyheat/keyheat/detect/internal/member"
	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sink/archive"
	"github.com/keyheat/keyheat/sink/clickhouse"
)

// chTry bounds one attempt to hand a report to ClickHouse. A full buffer
// is retried on the next turn of the loop with fetching paused, instead
// of blocking a loop that must keep polling to stay in its group.
const chTry = 100 * time.Millisecond

// mergeRunner is the merge group's member. The group has one partition
// to give (the windows topic's), so Kafka elects exactly one merger among
// the instances; a new one takes over when it leaves. While elected it
// feeds the summaries to a Merger, publishes the reports to the reports
// topic and the sinks, and commits the windows topic as the merger
// allows, with the end of its acknowledged reports as metadata so a new
// merger does not report a window twice.
type mergeRunner struct {
	s  *Service
	cl *kgo.Client
	// led counts the reports and cluster events in flight (mergeOut).
	led *ledger.Ledger[mergeOut]
	// reportHint sizes the reports' values.
	reportHint sizeHint

	// mu guards what the callbacks hand to the loop.
	mu     sync.Mutex
	owned  bool // the group gave us the windows partition
	joined bool // the group gave us an assignment, maybe empty
	start  *startInfo
	endCh  chan int64 // ExitAtEnd: the windows offset to read up to
	// endSent ends when endCh has the end: a poll waiting for summaries
	// that may all be read already is cut short.
	endSent context.Context
	sendEnd context.CancelFunc

	// loop-owned, and the revoke callback's while it runs (the loop is
	// then between AllowRebalance and its next poll)
	m      *pipeline.Merger
	reg    *unregisterer // the merger's metrics, dropped with it
	next   int64         // offset after the last summary read; -1 before any
	endAt  int64         // -1 until endInput
	outbox []chReport    // reports ClickHouse had no room for yet
	// outboxLen is len(outbox), for what a stop logs from another
	// goroutine (sayDraining).
	outboxLen atomic.Int64
	// pauses holds the windows partition's fetching while ClickHouse
	// has no room for the outbox.
	pauses member.Pauses
	// arch archives the reports, hotArch the cluster stage's hot-key
	// events (both nil without an archive); archLed and hotLed
	// acknowledge what they appended once flushed.
	arch      *archive.ReportWriter
	archLed   *ledger.Archive[mergeOut, *schemas.WindowReport]
	hotArch   *archive.HotKeyWriter
	hotLed    *ledger.Archive[mergeOut, *schemas.HotKeyEvent]
	lastFlush time.Time
	// committer commits the windows partition; it knows the commit
	// fetched at the election and every one since.
	committer *member.Committer
	// When the group was last asked which partitions it reads.
	expectedAt time.Time
	// The oldest window held, since when, and when the wait for it was
	// last logged (sayWaiting).
	waitStart          int64
	waitSince, waitLog time.Time
	// refusedLogged is the cluster stage's KeysRefused last logged, at
	// refusedLog.
	refusedLogged uint64
	refusedLog    time.Time
	// status tells the merger which partitions are silent or idle without
	// events (the board); nil in an ExitAtEnd run, which waits for every
	// partition and reports what is left at the end (Finish), so its
	// reports depend on its input only.
	status pipeline.StatusFunc
	// runCtx is run's: it ends on a stop, which cancels the produce
	// calls waiting for buffer space; their refusals are not failures.
	runCtx context.Context

	// cluster decides the hot keys of topics not keyed by access key
	// from the candidate batches on the windows topic (see clusterHold).
	cluster *pipeline.ClusterAlerts
	// cands are the offsets and slot ends of the candidate batches read,
	// oldest first, as far back as the cluster's warm-up reaches;
	// lastCand the offset of the newest.
	cands    []candRecord
	lastCand int64
}

type candRecord struct{ off, slotEndMs int64 }

// mergeOut is what a merger's output is for: the reports of the window
// starting at startMs, or (cluster) a cluster event, held in the ledger
// at the offset of the batch read when it was raised.
type mergeOut struct {
	cluster bool
	startMs int64
	// fromMs: a round no later than the one that raised the event.
	fromMs int64
}

type chReport struct {
	r *schemas.WindowReport
	t ledger.Ticket
}

func newMergeRunner(s *Service) (*mergeRunner, error) {
	mr := &mergeRunner{s: s, next: -1, endAt: -1, endCh: make(chan int64, 1)}
	mr.led = ledger.New(mr.acked, mr.refused)
	mr.committer = member.NewCommitter(member.CommitterConfig{Logger: s.log, RequestMsg: "commit merge offset", PartitionMsg: "commit merge offset",
		OK: s.m.commits.WithLabelValues("merge", "ok"), Failed: s.m.commits.WithLabelValues("merge", "error")})
	mr.endSent, mr.sendEnd = context.WithCancel(context.Background())
	if !s.cfg.ExitAtEnd {
		mr.status = func(topic string, partition int32) pipeline.PartitionStatus {
			return s.board.status(topic, partition)
		}
	}
	opts := append(append([]kgo.Opt{}, s.cfg.ClientOpts...), member.GroupConfig{Group: s.cfg.MergeGroup, Topics: []string{s.cfg.Topics.Windows},
		// A new merge group reads every summary still on the topic: the
		// reports it re-emits carry the IDs they had, and the sinks dedupe.
		Reset:          kgo.NewOffset().AtStart(),
		SessionTimeout: s.cfg.SessionTimeout, InstanceID: s.inst.id, Logger: s.log,
		OnFenced: func(err error) { s.checkFenced(s.cfg.MergeGroup, err) },
		Fenced:   s.fenced.Load,
		Handler:  member.Funcs{OnAssigned: mr.onAssigned, OnFetched: mr.onFetched, OnRevoked: mr.onRevoked, OnLost: mr.onLost},
	}.Opts()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("detect: kafka merge consumer: %w", err)
	}
	mr.cl = cl
	return mr, nil
}

// endInput tells an ExitAtEnd merger to report everything once it read
// the windows topic up to end.
func (mr *mergeRunner) endInput(end int64) {
	mr.endCh <- end
	mr.sendEnd()
}

func (mr *mergeRunner) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	mr.joined = true
	if len(assigned[mr.s.cfg.Topics.Windows]) > 0 {
		mr.owned = true
		mr.s.m.merging.Set(1)
		mr.s.log.Info("elected merger", "group", mr.s.cfg.MergeGroup)
	}
}

func (mr *mergeRunner) onFetched(_ context.Context, commits map[member.TP]member.Point) error {
	if c, ok := commits[mr.windowsTP()]; ok {
		mr.mu.Lock()
		mr.start = &startInfo{committed: c.Offset, meta: c.Metadata, end: -1, first: c.Offset}
		mr.mu.Unlock()
	}
	return nil
}

func (mr *mergeRunner) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked[mr.s.cfg.Topics.Windows]) == 0 {
		return
	}
	mr.release().Give(context.WithoutCancel(ctx), map[member.TP]member.Part{mr.windowsTP(): merging{mr}}, false)
}

func (mr *mergeRunner) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	if len(lost[mr.s.cfg.Topics.Windows]) == 0 {
		return
	}
	mr.s.log.Warn("merger lost the windows partition; not committing it")
	mr.release().Give(context.WithoutCancel(ctx), map[member.TP]member.Part{mr.windowsTP(): merging{mr}}, true)
}

// release gives the windows partition up; the loop is parked between
// AllowRebalance and its next poll meanwhile.
func (mr *mergeRunner) release() member.Release {
	return member.Release{FlushTimeout: mr.s.cfg.FlushTimeout, Commit: func(ctx context.Context, ps map[member.TP]member.Point) {
		mr.committer.Commit(ctx, mr.cl, ps)
	}}
}

// merging is the windows partition as the merger gives it up.
type merging struct{ mr *mergeRunner }

func (merging) Stop() {} // the loop is parked: nothing runs

// Drain waits for the reports in flight and returns the merger's commit
// point.
func (m merging) Drain(ctx context.Context) (member.Point, bool) {
	m.mr.drain(ctx)
	return m.mr.point()
}

func (m merging) Close() { m.mr.drop() }

// drop forgets the merger's state; the next one resumes from the commit.
func (mr *mergeRunner) drop() {
	mr.m = nil
	mr.cluster, mr.cands = nil, nil
	mr.reg.unregisterAll()
	mr.next = -1
	mr.led.Reset()
	mr.outbox = nil
	mr.outboxLen.Store(0)
	mr.pauses.Forget(mr.cl, mr.windowsTP())
	mr.committer.Forget(mr.windowsTP())
	if mr.arch != nil {
		if err := mr.arch.Close(); err != nil {
			mr.s.log.Warn("close report archive", "err", err)
		}
		mr.arch, mr.archLed = nil, nil
	}
	if mr.hotArch != nil {
		if err := mr.hotArch.Close(); err != nil {
			mr.s.log.Warn("close cluster hot-key archive", "err", err)
		}
		mr.hotArch, mr.hotLed = nil, nil
	}
	mr.mu.Lock()
	mr.owned, mr.start = false, nil
	mr.mu.Unlock()
	mr.s.m.merging.Set(0)
}

// run is the merge group's loop, until ctx ends or, in an ExitAtEnd run,
// the input is reported. Leaving the group (Close) commits as a revoke.
func (mr *mergeRunner) run(ctx context.Context) error {
	s := mr.s
	mr.runCtx = ctx
	defer func() {
		s.waitHoldClose()
		mr.cl.Close()
	}()
	lastCommit := s.now()
	var ws joinWait
	for {
		mr.mu.Lock()
		joined := mr.joined
		mr.mu.Unlock()
		s.sayJoinWait(&ws, !joined, fmt.Sprintf("waiting for the merge group to elect a merger; a previous member may hold the windows topic until its session times out (up to %v)", s.cfg.SessionTimeout),
			"group", s.cfg.MergeGroup)
		select {
		case <-ctx.Done():
			return nil
		case <-s.failed:
			return nil
		default:
		}
		if stop, err := mr.turn(ctx, &lastCommit); stop || err != nil {
			return err
		}
	}
}

// turn is one poll and what follows it, up to AllowRebalance, which it
// always calls: a loop leaving without it would hold every rebalance,
// its own group leave included, for ever. An ExitAtEnd run's end check
// is part of the turn: it commits, and uses the merger the revoke
// callback drops, so no rebalance may run beside it.
func (mr *mergeRunner) turn(ctx context.Context, lastCommit *time.Time) (stop bool, err error) {
	s := mr.s
	wake := context.Background()
	if mr.endAt < 0 {
		wake = mr.endSent // once: after the end came, checkEnd runs after every poll
	}
	fenced := func(err error) bool { return s.checkFenced(s.cfg.MergeGroup, err) }
	closed := member.Turn(ctx, wake, mr.cl, s.cfg.MaxPollRecords, s.log, fenced, func(fs kgo.Fetches) {
		if ctx.Err() != nil {
			stop = true
			return
		}
		if stop, err = mr.handle(ctx, fs, lastCommit); stop || err != nil {
			return
		}
		select {
		case e := <-mr.endCh:
			mr.endAt = e
		default:
		}
		if mr.endAt >= 0 {
			stop, err = mr.checkEnd(ctx)
		}
	})
	return closed || stop, err
}

// handle merges the polled summaries and candidate batches, publishes
// what they complete and commits, between a poll and AllowRebalance.
func (mr *mergeRunner) handle(ctx context.Context, fs kgo.Fetches, lastCommit *time.Time) (stop bool, err error) {
	s := mr.s
	if err := mr.ensureMerger(); err != nil {
		s.fail(err)
		return true, err
	}
	if mr.m != nil {
		mr.refreshExpected(ctx)
		// The cluster stage first: its alerts do not wait for the
		// summaries' decoding and merging, the poll's heavy part. The two
		// are independent, and each sees its own records in order.
		fs.EachRecord(mr.addCandidates)
		mr.cluster.SetRules(mr.s.rules.Load()) // reloads reach the cluster stage too
		mr.emitCluster(ctx, mr.cluster.Ready(mr.status, nil))
		fs.EachRecord(mr.addSummary)
		mr.emit(ctx, mr.m.Ready(mr.status))
		mr.sayRefused()
		mr.sayWaiting()
		mr.retryClickHouse(ctx)
		mr.led.Apply()
		mr.flushArchive(ctx, false)
		if now := s.now(); now.Sub(*lastCommit) >= s.cfg.CommitInterval {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.FlushTimeout)
			mr.commit(cctx) // not cut off by a stop (see Service.turn)
			cancel()
			*lastCommit = now
		}
	}
	return false, nil
}

// ensureMerger builds the merger once the group gave us the partition and
// its committed offset.
func (mr *mergeRunner) ensureMerger() error {
	if mr.m != nil {
		return nil
	}
	mr.mu.Lock()
	owned, st := mr.owned, mr.start
	mr.mu.Unlock()
	if !owned || st == nil {
		return nil
	}
	done, clusterFrom := int64(0), int64(schemas.NoTimeMs)
	if st.meta != "" {
		d, f, err := parseMergeMeta(st.meta)
		if err != nil {
			mr.s.log.Warn("merge commit metadata not usable; windows reported before the commit may be reported again", "metadata", st.meta, "err", err)
		} else {
			done, clusterFrom = d, f
		}
	}
	cfg := *mr.s.cfg.Merge
	cfg.DoneThroughMs, cfg.Topics = done, mr.s.eventCounts()
	if cfg.Threshold == nil {
		cfg.Threshold = mr.s.threshold
	}
	if cfg.SplitCapacity == 0 {
		cfg.SplitCapacity = mr.s.cfg.Pipeline.Detect.SplitCapacity // alerts and reports advise alike
	}
	mr.reg = newUnregisterer(mr.s.cfg.Registerer)
	cfg.Registerer = mr.reg.or()
	if cfg.Logger == nil {
		cfg.Logger = mr.s.log
	}
	m, err := pipeline.NewMerger(cfg)
	if err != nil {
		return fmt.Errorf("detect: merger: %w", err)
	}
	mr.m, mr.next = m, st.first
	p := mr.s.cfg.Pipeline
	mr.cluster = pipeline.NewClusterAlerts(mr.s.rules.Load(), p.Detect, clusterHoldMs(mr.s.cfg.Merge.MergerOptions, p))
	mr.cluster.SetStart(clusterFrom)
	if err := mr.cluster.Register(cfg.Registerer); err != nil {
		return fmt.Errorf("detect: %w", err)
	}
	mr.cands, mr.lastCand = nil, -1
	if st.committed >= 0 {
		mr.committer.Seed(mr.windowsTP(), member.Point{Offset: st.committed, Metadata: st.meta})
	}
	if a := mr.s.cfg.Archive; a != nil {
		rw, err := a.Reports("merger")
		if err != nil {
			return fmt.Errorf("detect: report archive: %w", err)
		}
		hw, err := a.HotKeys(clusterArchiveSource)
		if err != nil {
			return errors.Join(fmt.Errorf("detect: cluster hot-key archive: %w", err), rw.Close())
		}
		mr.arch, mr.hotArch, mr.lastFlush = rw, hw, mr.s.now()
		mr.archLed, mr.hotLed = ledger.NewArchive(mr.led, rw), ledger.NewArchive(mr.led, hw)
	}
	return nil
}

// clusterHoldMs is how far (in event time) a partition's candidate
// batches may fall behind the newest before the cluster stage stops
// waiting for them: max_pending_windows report windows plus the
// lateness, what the summaries' merger holds. The aligner keeps a
// partition's position within half that of the slowest, but a position
// runs ahead of what the merger has read: a starved partition's batches
// may still be unsent while it counts as one window further on, and the
// others run the whole alignment span past it. A hold of that span alone
// gave such a partition up as soon as the others reached its end,
// dropping its counts from the rounds between.
func clusterHoldMs(mo pipeline.MergerOptions, p pipeline.Options) int64 {
	return int64(mo.MaxPendingWindows)*p.Window.Milliseconds() + p.Lateness.Milliseconds()
}

// clusterArchiveSource names the merger's hot-key writer in the archive;
// a partition's is "<topic>-<partition>".
const clusterArchiveSource = "cluster"

// addCandidates feeds r to the cluster stage if it is a candidate batch.
func (mr *mergeRunner) addCandidates(r *kgo.Record) {
	if !schemas.IsCandidatesKey(r.Key) {
		return
	}
	c, err := schemas.DecodeCandidates(r.Value)
	if err != nil {
		mr.s.m.mergeInvalid.Inc()
		mr.s.log.Warn("candidate batch not used", "offset", r.Offset, "err", err)
		return
	}
	mr.cluster.Add(c)
	mr.cands = append(mr.cands, candRecord{off: r.Offset, slotEndMs: c.SlotEndMs})
	mr.lastCand = r.Offset
}

// addSummary feeds r to the merger if it is a window summary, and moves
// the position past it.
func (mr *mergeRunner) addSummary(r *kgo.Record) {
	mr.next = r.Offset + 1
	if schemas.IsCandidatesKey(r.Key) {
		return
	}
	w, err := schemas.DecodePartitionWindow(r.Value)
	if err == nil {
		err = mr.m.Add(w, r.Offset, mr.s.now().UnixMilli())
	}
	if err != nil {
		mr.s.m.mergeInvalid.Inc()
		mr.s.log.Warn("window summary not merged", "offset", r.Offset, "err", err)
	}
}

// emit publishes the reports of merged windows to the reports topic and
// the sinks; a window counts acknowledged once every destination has
// every one of its reports.
func (mr *mergeRunner) emit(ctx context.Context, mws []pipeline.MergedWindow) {
	s := mr.s
	for _, mw := range mws {
		start := mw.StartMs
		per := 1
		if s.cfg.ClickHouse != nil {
			per++
		}
		if mr.arch != nil {
			per++
		}
		t := mr.led.Add(mergeOut{startMs: start}, per*len(mw.Reports)) // none: done at once
		for i := range mw.Reports {
			r := &mw.Reports[i]
			v, err := r.AppendJSON(mr.reportHint.buf())
			if err != nil {
				s.fail(fmt.Errorf("detect: %w", err))
				return
			}
			mr.reportHint.saw(v)
			s.produce(ctx, &kgo.Record{Topic: s.cfg.Topics.Reports, Key: []byte(r.ID), Value: v}, mr.led.Sent(t))
			if s.cfg.ClickHouse != nil {
				mr.outbox = append(mr.outbox, chReport{r: r, t: t})
				mr.outboxLen.Store(int64(len(mr.outbox)))
			}
			if mr.arch != nil {
				if err := mr.archLed.Append(t, r); err != nil {
					s.fail(fmt.Errorf("detect: report archive: %w", err))
					return
				}
			}
			s.m.reports.Inc()
			s.print.report(r)
		}
	}
	mr.retryClickHouse(ctx)
}

// expectEvery is how often a live merger asks which partitions the detect
// group is assigned.
const expectEvery = 5 * time.Second

// refreshExpected, live, tells the merger which partitions the detect
// group reads (every partition of the topics its members are assigned),
// from the group's description when it is stable: a partition another
// instance reads is waited for before its first summary, and a topic the
// group reads no more is not, whatever summaries of it came before. A
// group in a rebalance is asked again later; meanwhile what was known
// holds.
func (mr *mergeRunner) refreshExpected(ctx context.Context) {
	if mr.status == nil || mr.s.now().Sub(mr.expectedAt) < expectEvery {
		return
	}
	mr.expectedAt = mr.s.now()
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second) // the loop must keep polling
	defer cancel()
	dg, err := mr.s.adm.DescribeGroups(dctx, mr.s.cfg.Group)
	if err == nil {
		err = dg.Error()
	}
	if err != nil {
		mr.s.log.Debug("describe the detect group for the partitions to expect", "group", mr.s.cfg.Group, "err", err)
		return
	}
	g := dg[mr.s.cfg.Group]
	if g.State != "Stable" {
		return
	}
	exp := map[string]int32{}
	for topic := range g.AssignedPartitions() {
		n, err := mr.s.partitionCount(dctx, topic)
		if err != nil {
			mr.s.log.Debug("partition count of a topic the group reads", "topic", topic, "err", err)
			return
		}
		exp[topic] = n
	}
	if len(exp) == 0 {
		return // no member holds anything: nothing to learn
	}
	mr.m.SetExpected(exp)
}

// sayRefused warns, at most every waitSay, when the cluster stage was
// full (pipeline.detect.cluster_keys) and left keys out since it last
// said so: their counts were not summed, and a key among them that is
// hot cluster-wide is not alerted.
func (mr *mergeRunner) sayRefused() {
	n := mr.cluster.Stats().KeysRefused.Load()
	now := mr.s.now()
	if n == mr.refusedLogged || now.Sub(mr.refusedLog) < waitSay {
		return
	}
	mr.s.log.Warn("cluster stage full: keys listed by partitions were not tracked, and a hot one among them is not alerted; raise pipeline.detect.cluster_keys",
		"refused", n-mr.refusedLogged, "refused_total", n, "cluster_keys", mr.s.cfg.Pipeline.Detect.ClusterKeys)
	mr.refusedLogged, mr.refusedLog = n, now
}

// waitSay is how long the merger waits for a window's partitions before
// it says which, and how often it says it again.
const waitSay = 10 * time.Second

// sayWaiting logs, every waitSay while the oldest window held waits, which
// partitions it waits for: slow ones are waited for however long they
// take, and whoever watches should see what for.
func (mr *mergeRunner) sayWaiting() {
	start, missing, ok := mr.m.Waiting(mr.status)
	now := mr.s.now()
	if !ok || start != mr.waitStart {
		mr.waitStart, mr.waitSince = start, now
		return
	}
	if now.Sub(mr.waitSince) < waitSay || now.Sub(mr.waitLog) < waitSay {
		return
	}
	mr.waitLog = now
	mr.s.log.Info("merger waiting for partitions to report a window (not silent, so waited for; see detect.partition_timeout)",
		"window_start_ms", start, "waiting_s", int(now.Sub(mr.waitSince).Seconds()), "partitions", missing,
		"windows_held", mr.m.Stats().Pending.Load())
}

// retryClickHouse hands waiting reports to ClickHouse. While it has no
// room, fetching pauses (and commits stay where the unacknowledged
// windows hold them) instead of the loop blocking.
func (mr *mergeRunner) retryClickHouse(ctx context.Context) {
	ch := mr.s.cfg.ClickHouse
	for len(mr.outbox) > 0 {
		c := mr.outbox[0]
		tctx, cancel := context.WithTimeout(ctx, chTry)
		t0 := time.Now()
		err := ch.WriteReport(tctx, c.r, clickhouse.AckFunc(mr.led.Sent(c.t)))
		mr.s.m.produceWait.Add(time.Since(t0).Seconds())
		cancel()
		if err != nil {
			mr.led.Unsent()
			if ctx.Err() == nil && tctx.Err() == nil {
				mr.s.fail(fmt.Errorf("detect: clickhouse: %w", err))
				return
			}
			break
		}
		mr.outbox[0] = chReport{}
		mr.outbox = mr.outbox[1:]
		mr.outboxLen.Store(int64(len(mr.outbox)))
	}
	if len(mr.outbox) > 0 {
		mr.pauses.Pause(mr.cl, mr.windowsTP(), member.Behind)
	} else {
		mr.pauses.Resume(mr.cl, mr.windowsTP(), member.Behind)
	}
}

// flushArchive makes the reports and cluster hot-key events appended to
// the archive durable, every ArchiveFlush or at once with force, and
// counts them acknowledged.
func (mr *mergeRunner) flushArchive(ctx context.Context, force bool) {
	if mr.arch == nil || mr.archLed.Unflushed()+mr.hotLed.Unflushed() == 0 ||
		!force && mr.s.now().Sub(mr.lastFlush) < mr.s.cfg.ArchiveFlush {
		return
	}
	if err := mr.archLed.Flush(ctx); err != nil {
		if ctx.Err() == nil {
			mr.s.fail(fmt.Errorf("detect: report archive: %w", err))
		}
		return
	}
	if err := mr.hotLed.Flush(ctx); err != nil {
		if ctx.Err() == nil {
			mr.s.fail(fmt.Errorf("detect: cluster hot-key archive: %w", err))
		}
		return
	}
	mr.lastFlush = mr.s.now()
}

// acked hears of an output every destination acknowledged: a window
// whose reports are all out moves the merger's commit point; a cluster
// event no longer holds the commit (clusterHold).
func (mr *mergeRunner) acked(o mergeOut) {
	if !o.cluster && mr.m != nil {
		mr.m.Acked(o.startMs)
	}
}

// refused stops the service on an output refused for good, unless the
// merger is stopping (its produce calls were cancelled).
func (mr *mergeRunner) refused(_ mergeOut, err error) {
	if mr.runCtx == nil || mr.runCtx.Err() == nil {
		mr.s.fail(fmt.Errorf("detect: merger: a report was refused for good: %w", err))
	}
}

// drain waits, until ctx ends, for the reports in flight.
func (mr *mergeRunner) drain(ctx context.Context) {
	if mr.m == nil {
		return
	}
	if d, ok := ctx.Deadline(); ok {
		stopSay := mr.s.sayDraining("merger giving up the windows topic", d, func() (n, parts int) {
			// Reports waiting for room in ClickHouse, and outputs
			// handed over and not yet acknowledged.
			n = int(mr.outboxLen.Load()) + mr.led.Pending()
			return n, 0
		})
		defer stopSay()
	}
	for len(mr.outbox) > 0 && ctx.Err() == nil {
		mr.retryClickHouse(ctx)
	}
	if mr.led.Wait(ctx) {
		mr.flushArchive(ctx, true)
	}
}

// commit commits the windows topic where the merger allows, with the end
// of its acknowledged reports as metadata.
func (mr *mergeRunner) commit(ctx context.Context) {
	if cp, ok := mr.point(); ok {
		mr.committer.Commit(ctx, mr.cl, map[member.TP]member.Point{mr.windowsTP(): cp})
	}
}

// point is where the merger allows the windows topic committed: the
// merger's commit offset held back by the cluster stage (clusterHold),
// with the end of its acknowledged reports as metadata.
func (mr *mergeRunner) point() (member.Point, bool) {
	if mr.m == nil {
		return member.Point{}, false
	}
	off, ok := mr.m.CommitOffset()
	if !ok {
		return member.Point{}, false
	}
	hold, from := mr.clusterHold()
	return member.Point{Offset: min(off, hold), Metadata: mergeMeta(mr.m.DoneThroughMs(), from)}, true
}

// windowsTP is the windows topic's one partition, the merge group's.
func (mr *mergeRunner) windowsTP() member.TP { return member.TP{Topic: mr.s.cfg.Topics.Windows} }

// checkEnd, in an ExitAtEnd run and inside a turn (see turn), reports
// everything once the summaries up to endAt are read, waits for the
// reports and commits. It returns true when the merger is done: that, or
// another instance merges.
func (mr *mergeRunner) checkEnd(ctx context.Context) (bool, error) {
	mr.mu.Lock()
	joined, owned, st := mr.joined, mr.owned, mr.start
	mr.mu.Unlock()
	if !joined {
		return false, nil
	}
	if !owned {
		return true, nil // another instance merges
	}
	if st == nil {
		return false, nil
	}
	if err := mr.ensureMerger(); err != nil {
		return true, err
	}
	pos := mr.next
	if pos < 0 {
		pos = max(st.first, 0)
	}
	if pos < mr.endAt {
		return false, nil
	}
	mr.emit(ctx, mr.m.Finish())
	mr.emitCluster(ctx, mr.cluster.Finish(nil))
	fctx, cancel := context.WithTimeout(ctx, mr.s.cfg.FlushTimeout)
	defer cancel()
	mr.drain(fctx)
	if h := mr.s.atMergerEnd; h != nil {
		h(mr.cl)
	}
	mr.commit(fctx)
	return true, nil
}

// The merge group's commit metadata: "khm1 done=<ms>", the end of the
// last window whose reports were all acknowledged.
const (
	mergeMetaPrefix  = "khm1 done="
	mergeMetaCluster = " cluster="
)

// mergeMeta is the merger's commit metadata: the reports done through
// doneThroughMs, and, when the cluster stage bounded the commit, the
// round from which its batches are all after the commit (clusterFromMs;
// schemas.NoTimeMs for none): a new merger decides no earlier round.
func mergeMeta(doneThroughMs, clusterFromMs int64) string {
	s := mergeMetaPrefix + strconv.FormatInt(doneThroughMs, 10)
	if clusterFromMs != schemas.NoTimeMs {
		s += mergeMetaCluster + strconv.FormatInt(clusterFromMs, 10)
	}
	return s
}

func parseMergeMeta(s string) (doneThroughMs, clusterFromMs int64, err error) {
	v, ok := strings.CutPrefix(s, mergeMetaPrefix)
	if !ok {
		return 0, 0, fmt.Errorf("merge commit metadata %q: want %q followed by a time", s, mergeMetaPrefix)
	}
	clusterFromMs = schemas.NoTimeMs
	done, from, hasFrom := strings.Cut(v, mergeMetaCluster)
	ms := func(v string) (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
			return 0, fmt.Errorf("merge commit metadata %q: %q is not a canonical time in ms", s, v)
		}
		return n, nil
	}
	if doneThroughMs, err = ms(done); err != nil {
		return 0, 0, err
	}
	if hasFrom {
		if clusterFromMs, err = ms(from); err != nil {
			return 0, 0, err
		}
	}
	return doneThroughMs, clusterFromMs, nil
}

// emitCluster publishes the cluster stage's hot-key events as a worker
// publishes a partition's: to the registry (record key
// schemas.HotKeyRecordKey, so the cluster's decision is the key's last
// record; a cooled is followed by the key's tombstone), ClickHouse and
// the archive, which dedupe by ID. An event holds the commit
// (clusterHold) until every one acknowledged it (its tombstone too), the
// archive once it flushed.
func (mr *mergeRunner) emitCluster(ctx context.Context, evs []schemas.HotKeyEvent) {
	s := mr.s
	nowMs := s.now().UnixMilli()
	for i := range evs {
		h := evs[i] // a copy the sinks may keep
		h.DetectedMs = nowMs
		// A hot's onset is an event time of the window that ended at its
		// round, a cooled's no later than its round, an update's (the
		// episode's onset) before it.
		o := mergeOut{cluster: true, fromMs: h.OnsetMs - h.WindowMs}
		if !publishHotKey(ctx, s, mr.led, mr.hotLed, &h, func(need int) ledger.Ticket { return mr.led.AddHeld(o, need, mr.lastCand) },
			"cluster hot-key archive") {
			return
		}
	}
}

// clusterHold is the lowest windows offset the merger may commit for the
// cluster stage: a restarted merger re-reads the candidate batches from
// there, so that its rounds see what the crashed one's saw over the
// longest rule window, the cool-down and the suppression before the last
// round, over two longest rule windows before the round that raised any
// key still hot (or cooled within the suppression and two windows: see
// pipeline.ClusterAlerts.EpisodeStartMs), and the batches
// behind any cluster event not acknowledged, and raises the same events
// with the same IDs; destinations dedupe by them. Without the episode
// hold a merger taking over from a commit after a still-hot key's onset
// raised it hot again with a later onset, a new ID; with an episode that
// stopped bearing as soon as its suppression ended, the span's start
// could still fall inside it, and did (a kill -9 of an instance a few
// seconds after a key cooled). So a key that stays
// hot holds the commit at its onset: the windows topic's retention must
// outlast the longest hot episode for a failover to keep its ID.
func (mr *mergeRunner) clusterHold() (hold, fromMs int64) {
	hold, fromMs = int64(math.MaxInt64), int64(schemas.NoTimeMs)
	if f, ok := mr.led.Floor(); ok {
		hold = f // the batch behind the oldest cluster event not acknowledged
	}
	if len(mr.cands) == 0 {
		return hold, fromMs
	}
	// From the last round evaluated, not the newest batch: with
	// partitions far apart the newest batch is far past the rounds, and
	// a span back from it fell inside a still-open episode.
	done, ok := mr.cluster.DoneMs()
	if !ok {
		return min(hold, mr.cands[0].off), fromMs // nothing decided yet: keep every batch
	}
	d := mr.s.cfg.Pipeline.Detect
	maxW := mr.s.rules.Load().MaxWindow().Milliseconds()
	from := done - (2*maxW + d.CoolDown.Milliseconds() + d.Suppress.Milliseconds())
	if start, ok := mr.cluster.EpisodeStartMs(); ok {
		from = min(from, start-2*maxW)
	}
	mr.led.Each(func(o mergeOut) {
		if o.cluster {
			from = min(from, o.fromMs)
		}
	})
	n := 0
	for n < len(mr.cands)-1 && mr.cands[n].slotEndMs < from {
		n++
	}
	mr.cands = mr.cands[:copy(mr.cands, mr.cands[n:])]
	return min(hold, mr.cands[0].off), from
}
