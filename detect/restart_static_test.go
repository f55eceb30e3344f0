package detect_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/internal/testenv"
)

// ghost joins group on topic as a static member with instance id and
// session timeout, waits for an assignment, and closes without leaving:
// to the group it is a member that crashed (kill -9), holding its
// partitions until its session times out.
func ghost(t *testing.T, seeds []string, group, topic, id string, session time.Duration) {
	t.Helper()
	assigned := make(chan struct{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.InstanceID(id), kgo.SessionTimeout(session), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case <-assigned:
			default:
				close(assigned)
			}
		}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		cl.PollFetches(pctx)
		pcancel()
		require.NoError(t, ctx.Err(), "the ghost member of %s was never assigned", group)
		select {
		case <-assigned:
			cl.Close() // a static member does not leave on close
			return
		default:
		}
	}
}

// TestRestartTakesBackCrashedMembership: an instance restarted after a
// crash with its instance id takes the dead member's partitions, and the
// merger's windows topic, back at once, instead of after the dead
// member's session timeout (here five minutes, longer than the waits).
func TestRestartTakesBackCrashedMembership(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 4)
		ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		_, err := e.admin(t).CreateTopic(ctx, 1, -1, nil, e.windows)
		require.NoError(t, err)
		ghost(t, e.seeds, e.group, e.events, "crashed-0", 5*time.Minute)
		ghost(t, e.seeds, e.mergeGroup, e.windows, "crashed-0", 5*time.Minute)

		cfg := e.config(t)
		cfg.InstanceID = "crashed-0"
		r := start(t, cfg)
		// This test's waits keep the minute they had, not
		// testenv.HangGuard: five minutes would reach the ghosts'
		// session timeout, after which the group hands their
		// partitions on whether or not the restart took them back.
		testenv.EventuallyExplained(t, "every partition assigned", time.Minute, func() (bool, string) {
			n := r.svc.Assigned()
			return n == 4, fmt.Sprintf("%d of 4 assigned", n)
		})
		base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
		var recs []*kgo.Record
		for p := range int32(4) {
			recs = append(recs, event(e.events, p, "a", base+100), event(e.events, p, "a", base+1100))
		}
		produce(t, e.seeds, recs...)
		got, _ := waitWindowsWithin(t, e.seeds, e.reports, map[int64]uint64{base: 4}, time.Minute)
		require.Equal(t, uint64(4), got[base], "the merger reports, elected at once")
		require.NoError(t, r.stop(t))

		// The stop left both groups, static member or not. The ghosts'
		// sessions no longer matter here: the restart took their
		// memberships over, so this wait is a hang guard only.
		ctx, cancel = context.WithTimeout(context.Background(), testenv.HangGuard)
		defer cancel()
		adm := e.admin(t)
		testenv.EventuallyExplained(t, "both groups empty after the stop", 0, func() (bool, string) {
			dg, err := adm.DescribeGroups(ctx, e.group, e.mergeGroup)
			if err != nil {
				return false, err.Error()
			}
			n, m := len(dg[e.group].Members), len(dg[e.mergeGroup].Members)
			return n == 0 && m == 0, fmt.Sprintf("%d members in the group, %d in the merge group", n, m)
		})
	})
}

// TestWaitingForAssignmentSaysSo: a member that waits for a crashed
// member's session to time out says what it waits for, and takes the
// partitions once it has.
func TestWaitingForAssignmentSaysSo(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		ghost(t, e.seeds, e.group, e.events, "crashed-elsewhere", 20*time.Second)
		cfg := e.config(t)
		logs := &testenv.SyncBuffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		r := start(t, cfg)
		testenv.Eventually(t, "the waiting said", func() bool {
			return strings.Contains(logs.String(), "waiting for the group to assign partitions; a previous member may hold them until its session times out")
		})
		testenv.Eventually(t, "every partition assigned", func() bool { return r.svc.Assigned() == 2 })
		require.NoError(t, r.stop(t))
	})
}

// TestSameInstanceIDFenced: a second instance started with the id of a
// running one fences it out of the group; the first stops with an error
// saying so, instead of both fencing each other in turn.
func TestSameInstanceIDFenced(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		cfg := e.config(t)
		cfg.InstanceID = "twin"
		first := start(t, cfg)
		testenv.Eventually(t, "the first assigned", func() bool { return first.svc.Assigned() == 2 })
		second := start(t, cfg)
		// Bounded by the test's -timeout only: a first instance that
		// kept running beside its twin hangs here, and the dump of the
		// timeout shows where.
		err := <-first.done
		close(first.done)
		require.ErrorContains(t, err, "instance id twin")
		testenv.Eventually(t, "the second assigned", func() bool { return second.svc.Assigned() == 2 })
		require.NoError(t, second.stop(t))
	})
}

// fencedHold is how long TestFencedTwinStaysOut gives the fenced
// instance to rejoin. It is no deadline: a machine too starved to rejoin
// within it lets the old bug pass unseen, never makes the fixed code
// fail. franz-go's first backoff after an error is 250 ms (±20 %), and a
// rejoin follows it at once.
const fencedHold = 5 * time.Second

// stall joins group on topic as a dynamic member, waits for an
// assignment and then holds every later rebalance of the group: it
// polled and never allows a rebalance (kgo.BlockRebalanceOnPoll), so it
// does not rejoin, and the group waits for it (up to its rebalance
// timeout, longer than the test) with every other member's join
// pending. release lets the rebalance go on without it: it leaves.
func stall(t *testing.T, seeds []string, group, topic string) (release func()) {
	t.Helper()
	assigned := make(chan struct{})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.RebalanceTimeout(30*time.Minute),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			select {
			case <-assigned:
			default:
				close(assigned)
			}
		}))
	require.NoError(t, err)
	for joined := false; !joined; {
		pctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		cl.PollFetches(pctx)
		cancel()
		select {
		case <-assigned:
			joined = true // and no AllowRebalance from here on
		default:
			cl.AllowRebalance()
		}
	}
	release = sync.OnceFunc(func() {
		cl.AllowRebalance()
		cl.Close()
	})
	t.Cleanup(release)
	return release
}

// twinMember is the member id of group's member with instance id twin
// ("" while there is none). A static join in its place gives it a new
// one.
func twinMember(t *testing.T, adm *kadm.Client, group string) string {
	t.Helper()
	dg, err := adm.DescribeGroups(t.Context(), group)
	require.NoError(t, err)
	for _, m := range dg[group].Members {
		if m.InstanceID != nil && *m.InstanceID == "twin" {
			return m.MemberID
		}
	}
	return ""
}

// TestFencedTwinStaysOut: an instance fenced out by its twin stays out
// of both groups however late it gets to close its clients, so the twin
// keeps every partition and becomes the merger.
//
// franz-go rejoins after a fence once it backed off. The first instance
// here is fenced while its merge client's first join is still pending
// (a member that stalls the merge group's rebalance keeps it so), and a
// client that never joined rejoins with no member id: a static join,
// which the broker lets take the instance id back, fencing the twin's
// join. The first instance used to notice its fence only in its poll
// loops; holding its clients open (HoldClose) stands for the loaded
// machine on which that came after the rejoin and both instances
// stopped.
func TestFencedTwinStaysOut(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		e := newEnv(t, seeds, 2)
		adm := e.admin(t)
		_, err := adm.CreateTopic(t.Context(), 1, -1, nil, e.windows)
		require.NoError(t, err)
		releaseStall := stall(t, e.seeds, e.mergeGroup, e.windows)

		cfg := e.config(t)
		cfg.InstanceID = "twin"
		secondCfg := cfg
		secondReg := prometheus.NewPedanticRegistry()
		secondCfg.Registerer = secondReg
		first := start(t, cfg)
		hold := make(chan struct{})
		first.svc.HoldClose(hold)
		releaseHold := sync.OnceFunc(func() { close(hold) })
		t.Cleanup(releaseHold) // before start's cleanup stops the first
		var firstMember string
		testenv.Eventually(t, "the first assigned, its merge join pending", func() bool {
			firstMember = twinMember(t, adm, e.mergeGroup)
			return first.svc.Assigned() == 2 && firstMember != ""
		})

		second := start(t, secondCfg)
		// Its stop waits for the merge group's rebalance, which the
		// stalling member holds: a failing test releases it first.
		t.Cleanup(releaseStall)
		var secondMember string
		testenv.Eventually(t, "the second's merge join in place of the first's", func() bool {
			secondMember = twinMember(t, adm, e.mergeGroup)
			return secondMember != firstMember
		})
		testenv.Eventually(t, "the first fenced", func() bool {
			err := first.svc.Ready()
			return err != nil && strings.Contains(err.Error(), "instance id twin")
		})
		time.Sleep(fencedHold)
		require.Equal(t, secondMember, twinMember(t, adm, e.mergeGroup), "the fenced first instance took the instance id back")
		require.NoError(t, second.svc.Ready(), "the second was fenced while the first held its clients open")

		releaseStall()
		testenv.Eventually(t, "the second assigned and merging", func() bool {
			require.NoError(t, second.svc.Ready(), "the second was fenced")
			return second.svc.Assigned() == 2 && gather(t, secondReg)["keyheat_detect_merger"] == 1
		})
		releaseHold()
		err = <-first.done
		close(first.done)
		require.ErrorContains(t, err, "instance id twin")
		require.NoError(t, second.svc.Ready(), "the first's close fenced nobody")
		require.NoError(t, second.stop(t))
	})
}
