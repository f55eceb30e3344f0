package member

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestFence: only the fence marks a member fenced, it is heard once, and
// from then on the client's backoff keeps it from rejoining.
func TestFence(t *testing.T) {
	var heard []error
	f := &fence{onFenced: func(err error) { heard = append(heard, err) }}
	for _, err := range []error{kerr.UnknownMemberID, kerr.RebalanceInProgress, context.Canceled} {
		f.OnGroupManageError(err)
	}
	require.Empty(t, heard, "errors other than the fence")
	require.LessOrEqual(t, f.backoff(1), 300*time.Millisecond, "franz-go's first backoff before the fence")
	require.Equal(t, 5*time.Second, f.backoff(11), "franz-go's longest backoff before the fence")

	f.OnGroupManageError(fmt.Errorf("heartbeat: %w", kerr.FencedInstanceID))
	f.OnGroupManageError(kerr.FencedInstanceID)
	require.Len(t, heard, 1, "the fence is heard once")
	require.ErrorIs(t, heard[0], kerr.FencedInstanceID)
	require.Equal(t, fencedBackoff, f.backoff(1), "no rejoin after the fence")
}

// TestFencedElsewhere: a member whose owner was fenced through another of
// its groups stays out too, though its own client never saw the fence.
func TestFencedElsewhere(t *testing.T) {
	var owner atomic.Bool
	f := &fence{elsewhere: owner.Load}
	require.Less(t, f.backoff(1), fencedBackoff, "nobody fenced yet")
	owner.Store(true)
	require.Equal(t, fencedBackoff, f.backoff(1), "no join once the owner is fenced elsewhere")
	require.False(t, f.fenced.Load(), "its own fence is not claimed")
}
