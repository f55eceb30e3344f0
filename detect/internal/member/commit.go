package member

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TP names one partition of a topic.
type TP struct {
	Topic     string
	Partition int32
}

// Point is where a partition may be committed: the offset of the first
// record not done, and the metadata that tells the next owner what was
// already published before it.
type Point struct {
	Offset   int64
	Metadata string
}

// CommitterConfig configures a Committer.
type CommitterConfig struct {
	// Logger receives a commit's failures; nil discards.
	Logger *slog.Logger
	// RequestMsg is the message a failed commit request is logged with,
	// PartitionMsg the one of a partition the broker refused (with its
	// topic and partition).
	RequestMsg, PartitionMsg string
	// OK and Failed count committed partitions and failures (a failed
	// request counts once); nil counts nothing.
	OK, Failed prometheus.Counter
}

// Committer commits a group's partitions, each with its own metadata,
// and records what it committed: a point that would move a partition's
// commit back, or that equals the last one, is not sent. It is safe for
// concurrent use, but the commits it sends must be made in the group's
// generation that owns the partitions: between a poll and AllowRebalance,
// or in a revoke callback (kgo.BlockRebalanceOnPoll).
type Committer struct {
	cfg CommitterConfig

	mu   sync.Mutex
	last map[TP]Point
}

// NewCommitter returns a Committer that has committed nothing yet.
func NewCommitter(cfg CommitterConfig) *Committer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Committer{cfg: cfg, last: map[TP]Point{}}
}

// Last returns the point last committed for tp (or given to Seed).
func (c *Committer) Last(tp TP) (Point, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.last[tp]
	return p, ok
}

// Seed records p as tp's last commit, as the group's offset fetch told
// it at the assignment: no later commit goes behind it.
func (c *Committer) Seed(tp TP, p Point) {
	c.mu.Lock()
	c.last[tp] = p
	c.mu.Unlock()
}

// Forget drops what is known of tp's commits, once it is given up: a new
// owner learns the commit afresh.
func (c *Committer) Forget(tp TP) {
	c.mu.Lock()
	delete(c.last, tp)
	c.mu.Unlock()
}

// Commit commits, synchronously with cl, the points of want that move
// their partitions forward, each partition with its metadata (set on the
// group's own commit request, kgo.PreCommitFnContext), and returns how
// many partitions the broker took. A failure is logged and counted and
// leaves the last commit as it was; the next Commit tries again.
func (c *Committer) Commit(ctx context.Context, cl *kgo.Client, want map[TP]Point) map[TP]Point {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	metas := map[TP]string{}
	c.mu.Lock()
	for tp, p := range want {
		if last, ok := c.last[tp]; ok && (p.Offset < last.Offset || p == last) {
			// Never move a commit back: a hold that appeared after a
			// commit would only make the next owner read again.
			continue
		}
		if offsets[tp.Topic] == nil {
			offsets[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		// Epoch -1: the offset may be older than the newest leader epoch
		// seen, and -1 skips the broker's epoch fencing.
		offsets[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: p.Offset}
		metas[tp] = p.Metadata
	}
	c.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	cctx := kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			for j := range req.Topics[i].Partitions {
				p := &req.Topics[i].Partitions[j]
				if m, ok := metas[TP{req.Topics[i].Topic, p.Partition}]; ok {
					p.Metadata = &m
				}
			}
		}
		return nil
	})
	var done map[TP]Point
	cl.CommitOffsetsSync(cctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			inc(c.cfg.Failed)
			c.cfg.Logger.Error(c.cfg.RequestMsg, "err", err)
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				tp := TP{t.Topic, p.Partition}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					inc(c.cfg.Failed)
					c.cfg.Logger.Error(c.cfg.PartitionMsg, "topic", t.Topic, "partition", p.Partition, "err", err)
					continue
				}
				meta, ok := metas[tp]
				if !ok {
					continue
				}
				pt := Point{Offset: offsets[tp.Topic][tp.Partition].Offset, Metadata: meta}
				c.mu.Lock()
				c.last[tp] = pt
				c.mu.Unlock()
				if done == nil {
					done = map[TP]Point{}
				}
				done[tp] = pt
				inc(c.cfg.OK)
			}
		}
	})
	return done
}

func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}
