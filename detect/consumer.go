package detect

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/detect/internal/member"
)

// pollTick bounds one poll, so commits and the end-of-input check run
// while no record comes.
const pollTick = member.PollTick

// fetchMaxWait bounds how long the broker holds a fetch for partitions
// with nothing new (see consumerOpts).
const fetchMaxWait = 100 * time.Millisecond

// poll is the detect group's loop: it hands polled records to their
// partitions' workers and commits their commit points, both between a
// poll and AllowRebalance, so no rebalance callback runs meanwhile and
// every partition committed is still ours (the generation cannot change
// under the commit). It never blocks on a worker: it waits for one with
// no room for at most pollTick, and not while holding a rebalance (see
// waitRoom); a worker still behind has its partition's fetching paused,
// so a slow sink holds up neither a rebalance nor the other partitions.
func (s *Service) poll(ctx context.Context) error {
	lastCommit := s.now()
	var ws joinWait
	for {
		s.mu.Lock()
		joined := s.joined
		s.mu.Unlock()
		s.sayJoinWait(&ws, !joined, fmt.Sprintf("waiting for the group to assign partitions; a previous member may hold them until its session times out (up to %v)", s.cfg.SessionTimeout),
			"group", s.cfg.Group)
		select {
		case <-ctx.Done():
			return nil
		case <-s.failed:
			return s.failErr
		default:
		}
		if s.turn(ctx, &lastCommit) {
			return nil
		}
	}
}

// turn is one poll and what follows it, up to AllowRebalance, which it
// always calls (see mergeRunner.turn). It reports whether to stop: the
// client is closed, or an ExitAtEnd run is done.
func (s *Service) turn(ctx context.Context, lastCommit *time.Time) (stop bool) {
	s.waitRoom(ctx)
	// Once every partition ended no record comes: go and commit now
	// instead of at the end of the tick.
	fenced := func(err error) bool { return s.checkFenced(s.cfg.Group, err) }
	closed := member.Turn(ctx, s.finished, s.consumer(), s.cfg.MaxPollRecords, s.log, fenced, func(fs kgo.Fetches) {
		stop = s.handOff(ctx, fs, lastCommit)
	})
	return closed || stop
}

// handOff gives the polled records to their partitions' workers and
// commits, between a poll and AllowRebalance.
func (s *Service) handOff(ctx context.Context, fs kgo.Fetches, lastCommit *time.Time) (stop bool) {
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		s.mu.Lock()
		w := s.parts[tp{p.Topic, p.Partition}]
		s.mu.Unlock()
		if w == nil {
			return // not ours (any more); BlockRebalanceOnPoll makes this rare
		}
		last := p.Records[len(p.Records)-1].Offset
		end := p.HighWatermark
		if p.LastStableOffset >= 0 && p.LastStableOffset < end {
			end = p.LastStableOffset // read committed: what can be read now
		}
		lag := max(0, end-last-1)
		w.mLag.Set(float64(max(0, p.HighWatermark-last-1)))
		w.lag.Store(lag)
		w.enqueue(p.Records)
	})
	if s.cfg.ExitAtEnd && s.numParts() == 0 {
		s.checkIdle(ctx)
	}
	// Commits are not cut off by a stop: a half-done one helps nobody, and
	// the stop commits again anyway.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.FlushTimeout)
	defer ccancel()
	select {
	case <-s.finished.Done():
		// Every partition ended and published its final commit point:
		// commit them while we still own them.
		s.commit(cctx, nil)
		return true
	default:
	}
	if now := s.now(); now.Sub(*lastCommit) >= s.cfg.CommitInterval {
		s.commit(cctx, nil)
		*lastCommit = now
	}
	return false
}

// waitRoom waits, up to pollTick, while a worker has no room for another
// batch. Polling then would hand it a batch that pauses its partition,
// and a pause throws away what franz-go fetched for it meanwhile, to be
// fetched again; not polling instead leaves the next fetch in franz-go's
// buffer (it fetches again only once the poll took the last one), which
// is the backpressure a consumer wants. It runs after AllowRebalance, so
// it holds no rebalance up. A worker still full after the wait (a slow
// sink) is paused as before, and the other partitions go on.
func (s *Service) waitRoom(ctx context.Context) {
	var t *time.Timer
	for {
		s.mu.Lock()
		full := false
		for _, w := range s.parts {
			if w.full() {
				full = true
				break
			}
		}
		s.mu.Unlock()
		if !full {
			return
		}
		if t == nil {
			t = time.NewTimer(pollTick)
			defer t.Stop()
		}
		select {
		case <-s.room:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-s.failed:
			return
		}
	}
}

// signalRoom tells waitRoom that a worker took a batch.
func (s *Service) signalRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
}

// onAssigned starts a worker per new partition. Where it starts is not
// known yet: onFetched tells the workers, before any record of theirs is
// fetched.
func (s *Service) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	s.cons.CompareAndSwap(nil, cl)
	s.mu.Lock()
	s.joined = true
	s.mu.Unlock()
	for topic, parts := range assigned {
		n, err := s.partitionCount(ctx, topic)
		if err != nil {
			s.fail(err)
			return
		}
		for _, p := range parts {
			s.mu.Lock()
			w := newPartWorker(s, tp{topic, p}, n, s.alignerLocked())
			s.parts[w.tp] = w
			w.align.join(w)
			s.mu.Unlock()
			go w.run()
		}
	}
	s.m.assigned.Set(float64(s.numParts()))
	s.log.Info("partitions assigned", "partitions", assigned)
	s.checkFinished()
}

// onFetched hands each new partition the offset it starts at and the
// metadata committed with it: the committed offset itself tells franz-go
// where to fetch, the metadata tells the core what the earlier owner had
// already published. It is the group's own answer (OffsetFetch in this
// session), so it is exactly what the fetch starts from.
func (s *Service) onFetched(ctx context.Context, commits map[member.TP]member.Point) error {
	for k, c := range commits {
		s.mu.Lock()
		w := s.parts[tp{k.Topic, k.Partition}]
		s.mu.Unlock()
		if w == nil {
			continue
		}
		st := startInfo{committed: c.Offset, meta: c.Metadata, end: -1, first: c.Offset}
		if s.cfg.ExitAtEnd {
			if err := s.bounds(ctx, k.Topic, k.Partition, &st); err != nil {
				return err
			}
		} else {
			// Live: how many records wait, so that a partition with a
			// backlog is not taken for idle before it read it. One with
			// none holds the others back like one that has not read its
			// first event yet, until the idle timeout: records may be on
			// their way to it (a backfill started with detect), and the
			// others must not run far ahead of them meanwhile.
			b := st
			if err := s.bounds(ctx, k.Topic, k.Partition, &b); err != nil {
				s.log.Debug("end offset of a partition assigned", "topic", k.Topic, "partition", k.Partition, "err", err)
				go w.learnLag(st) // until then the partition is not idle
			} else {
				w.lag.Store(max(0, b.end-b.first))
			}
		}
		w.setStart(st)
	}
	return nil
}

// learnLag asks for a live partition's end offset until it has it (or
// a fetch told it first, or the partition is given up), when asking at
// the assignment failed.
func (w *partWorker) learnLag(st startInfo) {
	for wait := 100 * time.Millisecond; w.lag.Load() == lagUnknown; wait = min(2*wait, 5*time.Second) {
		select {
		case <-w.ctx.Done():
			return
		case <-time.After(wait):
		}
		b := st
		if err := w.s.bounds(w.ctx, w.tp.topic, w.tp.partition, &b); err != nil {
			w.s.log.Debug("end offset of a partition", "topic", w.tp.topic, "partition", w.tp.partition, "err", err)
			continue
		}
		w.lag.CompareAndSwap(lagUnknown, max(0, b.end-b.first))
	}
}

// bounds finds, for an ExitAtEnd run, the partition's end (the last
// stable offset now) and, without a commit, where the reset policy starts
// it, so a partition with nothing to read ends at once.
func (s *Service) bounds(ctx context.Context, topic string, partition int32, st *startInfo) error {
	end, err := s.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("detect: end offsets of %s: %w", topic, err)
	}
	o, ok := end.Lookup(topic, partition)
	if !ok || o.Err != nil {
		return fmt.Errorf("detect: end offset of %s/%d: %v", topic, partition, o.Err)
	}
	st.end = o.Offset
	if st.first >= 0 {
		return nil
	}
	var first int64
	switch s.cfg.From {
	case FromLatest:
		first = st.end
	case FromEarliest:
		l, err := s.adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return fmt.Errorf("detect: start offsets of %s: %w", topic, err)
		}
		o, _ := l.Lookup(topic, partition)
		first = o.Offset
	default:
		at, _ := time.Parse(time.RFC3339Nano, s.cfg.From)
		l, err := s.adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topic)
		if err != nil {
			return fmt.Errorf("detect: offsets of %s after %s: %w", topic, s.cfg.From, err)
		}
		o, _ := l.Lookup(topic, partition)
		first = o.Offset
		if first < 0 {
			first = st.end
		}
	}
	st.first = first
	return nil
}

// onRevoked gives partitions up the clean way: their workers stop, their
// outputs in flight are waited for (FlushTimeout at most), and what they
// allow is committed, in this generation, before another member gets
// them. It also runs for every partition when Close leaves the group,
// which is how a stop commits what is done.
func (s *Service) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	s.release(context.WithoutCancel(ctx), revoked, false)
}

// onLost drops partitions without committing: the group moved on, and
// another member may already have committed further, which our commit
// would move back.
func (s *Service) onLost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.log.Warn("partitions lost; not committing them", "partitions", lost)
	s.release(context.WithoutCancel(ctx), lost, true)
}

// release gives the workers of ps up (member.Release.Give): they stop;
// unless lost, their outputs in flight are waited for and their final
// commit points committed; then they close.
func (s *Service) release(ctx context.Context, ps map[string][]int32, lost bool) {
	parts := map[member.TP]member.Part{}
	var ws []*partWorker
	s.mu.Lock()
	for t, ns := range ps {
		for _, p := range ns {
			if w := s.parts[tp{t, p}]; w != nil {
				parts[member.TP{Topic: t, Partition: p}] = givenUp{w}
				ws = append(ws, w)
			}
		}
	}
	s.mu.Unlock()
	member.Release{Now: s.now, FlushTimeout: s.cfg.FlushTimeout, Commit: s.commitPoints,
		Draining: func(deadline time.Time) func() {
			return s.sayDraining("releasing partitions", deadline, func() (n, parts int) {
				for _, w := range ws {
					if p := w.led.Pending(); p > 0 {
						n += p
						parts++
					}
				}
				return n, parts
			})
		},
	}.Give(ctx, parts, lost)
	s.m.assigned.Set(float64(s.numParts()))
	s.log.Info("partitions released", "partitions", ps, "lost", lost)
	s.checkFinished()
}

// givenUp is a worker as its member gives it up.
type givenUp struct{ w *partWorker }

func (g givenUp) Stop() { g.w.stop() }

// Drain waits for the outputs in flight and returns the final commit
// point the worker published.
func (g givenUp) Drain(ctx context.Context) (member.Point, bool) {
	g.w.drain(ctx)
	if p := g.w.point.Load(); p != nil {
		return member.Point(*p), true
	}
	return member.Point{}, false
}

// Close forgets the partition and releases what its worker holds.
func (g givenUp) Close() {
	w, s := g.w, g.w.s
	s.mu.Lock()
	delete(s.parts, w.tp)
	w.align.leave(w)
	s.mu.Unlock()
	s.committer.Forget(w.memberTP())
	w.close()
}

// alignerLocked returns the aligner the partitions share (Run made it;
// its drift derives from the merger's cap,
// pipeline.MergerOptions.AlignWindows, this instance's or, when it merges
// not, the default one). s.mu is held.
func (s *Service) alignerLocked() *aligner { return s.align }

func (s *Service) numParts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.parts)
}

// checkFinished ends finished once, in an ExitAtEnd run, every
// partition the group gave us has ended and published its last point.
func (s *Service) checkFinished() {
	if !s.cfg.ExitAtEnd {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.joined || len(s.parts) == 0 && !s.nothingToDo {
		// A member assigned nothing may get partitions in the next round
		// of a cooperative rebalance: the poll loop finds out (idleDone).
		return
	}
	for _, w := range s.parts {
		if !w.isFinished() {
			return
		}
	}
	s.finish()
}

// checkIdle, in an ExitAtEnd run of a member assigned nothing, ends the
// run once the group is stable with every partition of its topics owned
// by other members: more instances than partitions. While a cooperative
// rebalance moves partitions, those are owned by nobody for a round, and
// this member waits for its share.
func (s *Service) checkIdle(ctx context.Context) {
	now := s.now()
	if now.Sub(s.lastIdleCheck) < time.Second {
		return
	}
	s.lastIdleCheck = now
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dg, err := s.adm.DescribeGroups(ctx, s.cfg.Group)
	if err == nil {
		err = dg.Error()
	}
	if err != nil {
		s.log.Debug("describe the detect group", "err", err)
		return
	}
	g := dg[s.cfg.Group]
	if g.State != "Stable" {
		return
	}
	owned := g.AssignedPartitions()
	for topic, n := range s.eventCounts() {
		for p := range n {
			if !owned.Lookup(topic, p) {
				return
			}
		}
	}
	s.mu.Lock()
	s.nothingToDo = true
	s.mu.Unlock()
	s.log.Info("every partition is another member's; nothing to read")
	s.checkFinished()
}

// commit commits, synchronously, the commit point of every worker in ws
// (every worker when ws is nil) that moved since its last commit, each
// with its metadata. It runs between a poll and AllowRebalance, or in a
// revoke callback: in either case the group's generation is the one the
// partitions belong to.
func (s *Service) commit(ctx context.Context, ws []*partWorker) {
	if ws == nil {
		s.mu.Lock()
		ws = sortedParts(s.parts)
		s.mu.Unlock()
	}
	want := map[member.TP]member.Point{}
	for _, w := range ws {
		if p := w.point.Load(); p != nil {
			want[w.memberTP()] = member.Point(*p)
		}
	}
	s.commitPoints(ctx, want)
}

// commitPoints commits points (see commit) and sets the committed
// offsets' gauges of the partitions still held.
func (s *Service) commitPoints(ctx context.Context, points map[member.TP]member.Point) {
	for k, p := range s.committer.Commit(ctx, s.consumer(), points) {
		s.mu.Lock()
		w := s.parts[tp{k.Topic, k.Partition}]
		s.mu.Unlock()
		if w != nil {
			w.mCommitted.Set(float64(p.Offset))
		}
	}
}

func partitionLabel(p int32) string { return strconv.Itoa(int(p)) }
