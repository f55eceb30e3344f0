package member

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fencedBackoff is how long a fenced member's client waits before it
// would rejoin: in effect never, since closing the client ends the wait.
const fencedBackoff = 24 * time.Hour

// fence keeps a static member that another member with its instance id
// fenced out (kerr.FencedInstanceID) from rejoining its group.
//
// franz-go treats the fence as one more error that ended a group
// session: its manage loop calls onLost, then the OnGroupManageError
// hooks, backs off (RetryBackoffFn) and joins again with the same
// instance id. A join with the member id it was fenced in is fenced
// again, but a client fenced while its first join was pending has no
// member id: its rejoin is a new static join, which takes the instance id
// back and fences the twin (Kafka and kfake alike), and each instance
// then stops, leaving the group to neither. Waiting for the poll loop to
// notice the fence and close the client leaves that window open as long
// as the loop is slow to come round (a loaded machine).
//
// The sequence that closes it, all on the manage loop's goroutine:
// OnGroupManageError sets fenced and tells the owner, then the manage
// loop asks backoff how long to wait, which is fencedBackoff from then on.
// The wait selects on the group's context, which Close (LeaveGroup)
// cancels, so closing the client is not slowed by it.
//
// fenced also lengthens every other retry backoff of the client (they
// share RetryBackoffFn). Nothing it does after the fence is of use, and
// every such wait also ends on Close: requests wait on the client's
// context, and Close cancels that once the group is left.
type fence struct {
	fenced    atomic.Bool
	onFenced  func(error)
	elsewhere func() bool // GroupConfig.Fenced; may be nil
}

var _ kgo.HookGroupManageError = (*fence)(nil)

// OnGroupManageError marks the member fenced when err is the fence; it
// runs on franz-go's manage loop before the backoff.
func (f *fence) OnGroupManageError(err error) {
	if !errors.Is(err, kerr.FencedInstanceID) {
		return
	}
	if f.fenced.CompareAndSwap(false, true) && f.onFenced != nil {
		f.onFenced(err)
	}
}

// backoff is franz-go's retry backoff until the member, or another of
// its owner's, is fenced, and fencedBackoff after.
func (f *fence) backoff(tries int) time.Duration {
	if f.fenced.Load() || f.elsewhere != nil && f.elsewhere() {
		return fencedBackoff
	}
	return retryBackoff(tries)
}

// retryBackoff is franz-go's default RetryBackoffFn (kgo does not export
// it): 250 ms doubling up to 5 s, each within ±20 %.
func retryBackoff(tries int) time.Duration {
	const (
		least = 250 * time.Millisecond
		most  = 5 * time.Second
	)
	if tries <= 0 {
		return least
	}
	if tries > 10 {
		return most
	}
	b := time.Duration(float64(least*time.Duration(1<<(tries-1))) * (0.8 + 0.4*rand.Float64()))
	return min(b, most)
}
