package detect

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Lose makes the service lose partitions as a fatal group error would.
func (s *Service) Lose(ctx context.Context, ps map[string][]int32) { s.onLost(ctx, s.consumer(), ps) }

// SetNow replaces the wall clock.
func (s *Service) SetNow(now func() time.Time) { s.now = now }

// Assigned is how many events partitions s holds now.
func (s *Service) Assigned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.parts)
}

// Heard reports whether s's progress board heard of the partition.
func (s *Service) Heard(topic string, partition int32) bool {
	if s.board == nil {
		return false
	}
	s.board.mu.Lock()
	defer s.board.mu.Unlock()
	return s.board.parts[tp{topic, partition}] != nil
}

// AtMergerEnd makes an ExitAtEnd merger call f, with its group's client,
// in its end check once its reports are drained and before it commits.
func (s *Service) AtMergerEnd(f func(cl *kgo.Client)) { s.atMergerEnd = f }

// HoldClose makes s keep both groups' clients open, once it stopped
// polling, until release is closed.
func (s *Service) HoldClose(release <-chan struct{}) { s.holdClose = release }
