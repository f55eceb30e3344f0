package member

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keyheat/keyheat/internal/testenv"
)

// stage is a member built from the kit the way detect's stages are: it
// records its commits as they come, commits what it holds when a
// partition is revoked, and never when one is lost.
type stage struct {
	c *Committer

	mu            sync.Mutex
	fetched       map[TP]Point
	points        map[TP]Point // what the stage would commit
	revoked, lost int
}

func (s *stage) handler() Funcs {
	return Funcs{
		OnAssigned: func(context.Context, *kgo.Client, map[string][]int32) {},
		OnFetched: func(_ context.Context, c map[TP]Point) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			for k, p := range c {
				s.fetched[k] = p
				if p.Offset >= 0 {
					s.c.Seed(k, p)
				}
			}
			return nil
		},
		OnRevoked: func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			s.mu.Lock()
			defer s.mu.Unlock()
			want := map[TP]Point{}
			for t, ps := range r {
				for _, p := range ps {
					if pt, ok := s.points[TP{t, p}]; ok {
						want[TP{t, p}] = pt
					}
				}
			}
			s.c.Commit(ctx, cl, want)
			s.revoked++
		},
		OnLost: func(context.Context, *kgo.Client, map[string][]int32) {
			s.mu.Lock()
			s.lost++
			s.mu.Unlock()
		},
	}
}

func newStage(t *testing.T, seeds []string, group, topic string) (*stage, *kgo.Client) {
	s := &stage{c: NewCommitter(CommitterConfig{}), fetched: map[TP]Point{}, points: map[TP]Point{}}
	opts := append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, GroupConfig{Group: group, Topics: []string{topic},
		Reset: kgo.NewOffset().AtStart(), SessionTimeout: 6 * time.Second, Handler: s.handler()}.Opts()...)
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	return s, cl
}

// pollUntil turns cl until cond holds (a hang guard, testenv.HangGuard).
func pollUntil(t *testing.T, cl *kgo.Client, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	for !cond() {
		require.NoError(t, ctx.Err(), "waiting for %s", what)
		Turn(ctx, context.Background(), cl, 100, nil, nil, func(kgo.Fetches) {})
	}
}

// A partition given up cleanly (Close leaves the group: a revoke) is
// committed with its metadata, which the next owner is handed at its
// assignment; the commits fetched there hold its own commits back.
func TestRevokeCommitsAndTheNextOwnerGetsTheMetadata(t *testing.T) {
	seeds := testenv.KFake(t)
	topic := testenv.NewTopic(t, seeds, 1)
	group := testenv.UniqueName(t, "g")
	tp := TP{topic, 0}

	a, acl := newStage(t, seeds, group, topic)
	pollUntil(t, acl, "the first owner's assignment", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		_, ok := a.fetched[tp]
		return ok
	})
	require.Equal(t, Point{Offset: -1}, a.fetched[tp], "nothing committed yet")
	a.mu.Lock()
	a.points[tp] = Point{42, "meta of a"}
	a.mu.Unlock()
	acl.Close() // leaves the group: revoke, which commits
	require.Equal(t, 1, a.revoked)
	require.Zero(t, a.lost)

	b, bcl := newStage(t, seeds, group, topic)
	defer bcl.Close()
	pollUntil(t, bcl, "the next owner's assignment", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		_, ok := b.fetched[tp]
		return ok
	})
	require.Equal(t, Point{42, "meta of a"}, b.fetched[tp])
	require.Empty(t, b.c.Commit(context.Background(), bcl, map[TP]Point{tp: {41, "behind"}}), "behind the fetched commit")
}

func TestCommits(t *testing.T) {
	meta := "m"
	resp := kmsg.NewPtrOffsetFetchResponse()
	g := kmsg.NewOffsetFetchResponseGroup()
	tt := kmsg.NewOffsetFetchResponseGroupTopic()
	tt.Topic = "e"
	for _, p := range []struct {
		part   int32
		off    int64
		meta   *string
		errNum int16
	}{{0, 10, &meta, 0}, {1, -1, &meta, 0}, {2, 5, nil, 0}, {3, 7, &meta, kerr.GroupAuthorizationFailed.Code}} {
		rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata, rp.ErrorCode = p.part, p.off, p.meta, p.errNum
		tt.Partitions = append(tt.Partitions, rp)
	}
	g.Topics = append(g.Topics, tt)
	resp.Groups = append(resp.Groups, g)
	require.Equal(t, map[TP]Point{
		{"e", 0}: {10, "m"},
		{"e", 1}: {Offset: -1}, // nothing committed: no metadata either
		{"e", 2}: {Offset: 5},
		// {"e", 3}: an error, surfaced by franz-go as a fetch error
	}, Commits(resp))
	require.Empty(t, Commits(kmsg.NewPtrOffsetFetchResponse()))
}
