package member

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/internal/kgolog"
)

// Handler hears a group's assignment lifecycle, partition by partition.
// Its methods run as franz-go's group callbacks: with
// kgo.BlockRebalanceOnPoll, Assigned, Revoked and Lost never overlap the
// poll loop's turn (between a poll and AllowRebalance); Fetched may.
type Handler interface {
	// Assigned hears of partitions given to this member. Where each
	// starts is not known yet: Fetched says, before any of its records
	// is fetched.
	Assigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32)
	// Fetched hands each new partition its commit: the offset the fetch
	// starts from (-1 for none: the reset offset applies) and the
	// metadata committed with it. An error fails the assignment.
	Fetched(ctx context.Context, commits map[TP]Point) error
	// Revoked hears of partitions taken back in a rebalance, or given up
	// when the client leaves the group: it may still commit them.
	Revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32)
	// Lost hears of partitions the group moved on without: another member
	// may own them already, so they must not be committed.
	Lost(ctx context.Context, cl *kgo.Client, lost map[string][]int32)
}

// GroupConfig configures a consumer group member's client.
type GroupConfig struct {
	Group  string
	Topics []string
	// Regex reads Topics as regular expressions (kgo.ConsumeRegex).
	Regex bool
	// Reset is where a partition without a commit starts.
	Reset          kgo.Offset
	SessionTimeout time.Duration
	// InstanceID, when set, makes the membership static.
	InstanceID string
	// OnFenced, with InstanceID, hears that another member joined with
	// the same instance id and fenced this one out, the moment franz-go
	// sees it; the client then never rejoins (see fence) and is only
	// good for closing. It runs on franz-go's group goroutine, so it
	// must not block. nil: nobody hears, the client still stays out.
	OnFenced func(err error)
	// Fenced, with InstanceID, reports whether the owner knows itself
	// fenced out through another of its members (one process's groups
	// share its instance id): the client then stays out too, rather
	// than join, perhaps for the first time, with an id that is the
	// twin's now. nil: only its own fence counts.
	Fenced  func() bool
	Logger  *slog.Logger
	Handler Handler
}

// Opts returns the group options of a member that commits by hand, only
// what its stage allows (kgo.DisableAutoCommit), that reads committed
// records only (ingest writes in transactions), and whose rebalances wait
// for the poll loop (kgo.BlockRebalanceOnPoll), so that a commit made
// between a poll and AllowRebalance is in the generation that owns its
// partitions. Append them after the connection's options. A static
// member (InstanceID) that is fenced out stays out until it is closed
// (see fence): for it the options set kgo.RetryBackoffFn, replacing one
// among the connection's options with franz-go's default backoff.
func (c GroupConfig) Opts() []kgo.Opt {
	h := c.Handler
	opts := []kgo.Opt{
		kgo.ConsumeTopics(c.Topics...),
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeResetOffset(c.Reset),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(c.SessionTimeout),
		kgo.OnPartitionsAssigned(h.Assigned),
		kgo.OnOffsetsFetched(func(ctx context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
			return h.Fetched(ctx, Commits(resp))
		}),
		kgo.OnPartitionsRevoked(h.Revoked),
		kgo.OnPartitionsLost(h.Lost),
		kgo.WithLogger(kgolog.New(c.Logger, kgolog.WarnAndAbove())),
	}
	if c.Regex {
		opts = append(opts, kgo.ConsumeRegex())
	}
	if c.InstanceID != "" {
		f := &fence{onFenced: c.OnFenced, elsewhere: c.Fenced}
		opts = append(opts, kgo.InstanceID(c.InstanceID), kgo.WithHooks(f), kgo.RetryBackoffFn(f.backoff))
	}
	return opts
}

// Commits reads the group's own offset fetch at an assignment: each
// partition's committed offset and metadata, -1 and none where nothing
// was committed. A partition the broker answered with an error is left
// out: franz-go surfaces the error as a fetch error.
func Commits(resp *kmsg.OffsetFetchResponse) map[TP]Point {
	out := map[TP]Point{}
	if len(resp.Groups) == 0 {
		return out
	}
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			if kerr.ErrorForCode(p.ErrorCode) != nil {
				continue
			}
			pt := Point{Offset: -1}
			if p.Offset >= 0 {
				pt.Offset = p.Offset
				if p.Metadata != nil {
					pt.Metadata = *p.Metadata
				}
			}
			out[TP{t.Topic, p.Partition}] = pt
		}
	}
	return out
}

// PollTick bounds one poll, so a turn's commits and checks run while no
// record comes.
const PollTick = 200 * time.Millisecond

// Turn is one poll of cl (at most maxRecords records, at most PollTick,
// cut short when wake ends) and what follows it, then AllowRebalance,
// which it always calls: a loop leaving without it would hold every
// rebalance, its own group leave included, for ever. Fetch errors are
// logged to log (nil: not), except a cancelled or timed-out poll's and
// those fenced reports as handled (it may be nil). then runs between the poll and
// AllowRebalance with the records, unless the client is closed, in which
// case Turn reports closed.
func Turn(ctx, wake context.Context, cl *kgo.Client, maxRecords int, log *slog.Logger, fenced func(error) bool, then func(kgo.Fetches)) (closed bool) {
	pctx, cancel := context.WithTimeout(ctx, PollTick)
	stop := context.AfterFunc(wake, cancel)
	fs := cl.PollRecords(pctx, maxRecords)
	stop()
	cancel()
	defer cl.AllowRebalance()
	if fs.IsClientClosed() {
		return true
	}
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || fenced != nil && fenced(err) {
			return
		}
		// franz-go retries what it can; what reaches us (an
		// authorisation failure, a deleted topic) needs a person.
		if log == nil {
			return
		}
		log.Error("fetch", "topic", t, "partition", p, "err", err)
	})
	then(fs)
	return false
}

// Funcs is a Handler made of functions, for a stage whose own type
// should not grow the methods.
type Funcs struct {
	OnAssigned func(ctx context.Context, cl *kgo.Client, assigned map[string][]int32)
	OnFetched  func(ctx context.Context, commits map[TP]Point) error
	OnRevoked  func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32)
	OnLost     func(ctx context.Context, cl *kgo.Client, lost map[string][]int32)
}

var _ Handler = Funcs{}

func (f Funcs) Assigned(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	f.OnAssigned(ctx, cl, m)
}
func (f Funcs) Fetched(ctx context.Context, c map[TP]Point) error { return f.OnFetched(ctx, c) }
func (f Funcs) Revoked(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
	f.OnRevoked(ctx, cl, m)
}
func (f Funcs) Lost(ctx context.Context, cl *kgo.Client, m map[string][]int32) { f.OnLost(ctx, cl, m) }
