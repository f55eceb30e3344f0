package detect

import (
	"context"
	"time"
)

// Lose makes the service lose partitions as a fatal group error would.
func (s *Service) Lose(ctx context.Context, ps map[string][]int32) { s.onLost(ctx, s.cons, ps) }

// SetNow replaces the wall clock.
func (s *Service) SetNow(now func() time.Time) { s.now = now }
