package member

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// part records what Release did to it, in order, in a log shared by all.
type part struct {
	name  string
	log   *[]string
	point Point
	has   bool
	// wait: Drain blocks until its ctx ends, as outputs that never come.
	wait bool
}

func (p *part) Stop() { *p.log = append(*p.log, "stop "+p.name) }
func (p *part) Drain(ctx context.Context) (Point, bool) {
	if p.wait {
		<-ctx.Done()
	}
	*p.log = append(*p.log, "drain "+p.name)
	return p.point, p.has
}
func (p *part) Close() { *p.log = append(*p.log, "close "+p.name) }

func TestReleaseRevokedDrainsThenCommits(t *testing.T) {
	var log []string
	var committed map[TP]Point
	r := Release{FlushTimeout: time.Minute, Commit: func(ctx context.Context, ps map[TP]Point) {
		_, ok := ctx.Deadline()
		require.True(t, ok, "the commit is bounded")
		log = append(log, "commit")
		committed = ps
	}}
	a, b := TP{"e", 0}, TP{"e", 1}
	r.Give(context.Background(), map[TP]Part{
		a: &part{name: "a", log: &log, point: Point{7, "ma"}, has: true},
		b: &part{name: "b", log: &log}, // nothing to commit
	}, false)
	require.Equal(t, map[TP]Point{a: {7, "ma"}}, committed)
	require.Len(t, log, 7)
	require.ElementsMatch(t, []string{"stop a", "stop b"}, log[:2], "every part stops first")
	require.ElementsMatch(t, []string{"drain a", "drain b"}, log[2:4])
	require.Equal(t, "commit", log[4], "the commit comes after every drain")
	require.ElementsMatch(t, []string{"close a", "close b"}, log[5:])
}

func TestReleaseLostDoesNotCommit(t *testing.T) {
	var log []string
	r := Release{FlushTimeout: time.Minute, Commit: func(context.Context, map[TP]Point) {
		t.Fatal("a lost partition is never committed")
	}, Draining: func(time.Time) func() {
		t.Fatal("a lost partition is not drained")
		return nil
	}}
	r.Give(context.Background(), map[TP]Part{{"e", 0}: &part{name: "a", log: &log, point: Point{7, "m"}, has: true}}, true)
	require.Equal(t, []string{"stop a", "close a"}, log)
}

// A drain that does not finish is cut at the deadline, set by the
// stage's clock, and the point it reached is committed all the same (a
// restart publishes the rest again); the stage hears when the drain
// starts and ends.
func TestReleaseDrainDeadline(t *testing.T) {
	var log []string
	now := time.Unix(1_000_000_000, 0) // long past: the deadline has passed
	var committed map[TP]Point
	var said []time.Time
	r := Release{Now: func() time.Time { return now }, FlushTimeout: 50 * time.Millisecond,
		Commit: func(_ context.Context, ps map[TP]Point) { committed = ps },
		Draining: func(deadline time.Time) func() {
			said = append(said, deadline)
			return func() { log = append(log, "said") }
		}}
	tp := TP{"e", 3}
	r.Give(context.Background(), map[TP]Part{tp: &part{name: "a", log: &log, point: Point{3, "m"}, has: true, wait: true}}, false)
	require.Equal(t, []time.Time{now.Add(50 * time.Millisecond)}, said)
	require.Equal(t, []string{"stop a", "drain a", "said", "close a"}, log)
	require.Equal(t, map[TP]Point{tp: {3, "m"}}, committed)
}
