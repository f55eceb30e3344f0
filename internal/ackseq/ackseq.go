// Package ackseq tracks the acknowledged prefix of one ordered stream whose
// entries are acknowledged in any order: "every entry that ends at or before
// position P is acknowledged". It is the shape of a commit watermark, like
// the ackseq package of CockroachDB's Pebble, with positions in place of
// contiguous sequence numbers so that the stream may have gaps: byte
// offsets of lines in a file, or Kafka offsets of records in a partition
// (an entry for the record at offset o ends at o+1, so the watermark is
// the offset to commit).
//
// ackseq owns only that bookkeeping. It does not know what an entry is,
// where its acknowledgement comes from, or what is saved or committed with
// the watermark; callers that keep more per entry (where its record
// landed, say) use the Range that Ack returns.
package ackseq

import (
	"context"
	"fmt"
	"sync"
)

// Seq is the acknowledgement watermark of one stream. Add registers
// entries in stream order; Ack may be called from any goroutine, in any
// order. The zero value is not usable; call New.
//
// A failed acknowledgement (Ack with an error) freezes the watermark for
// good: nothing at or after an entry that was not delivered may ever be
// committed, so the stream's owner must stop and let a restart resend
// from the watermark.
type Seq struct {
	mu      sync.Mutex
	base    uint64  // token of pending[0]
	pending []entry // entries added and not yet in the prefix, in order
	acked   int64   // the watermark
	lastEnd int64   // end of the last entry added, to check Add's order
	err     error   // first failed acknowledgement
	// idle is closed, and replaced, each time pending drains or the last
	// outstanding entry of a failed Seq is acknowledged; Wait sleeps on it.
	idle chan struct{}
}

type entry struct {
	end  int64
	done bool
}

// Range is a run of tokens [From, To): the entries an Ack moved into the
// acknowledged prefix. It is empty when From == To.
type Range struct {
	From, To uint64
}

// Len returns the number of tokens in r.
func (r Range) Len() int { return int(r.To - r.From) }

// New returns a Seq whose watermark starts at start: everything before it
// counts as acknowledged (the saved file position, the committed offset).
func New(start int64) *Seq {
	return &Seq{acked: start, lastEnd: start, idle: make(chan struct{})}
}

// Add registers the next entry of the stream, which ends at end, and
// returns its token for Ack. Tokens are consecutive from 0. Ends must not
// decrease, and must not be below the start: Add panics otherwise, as
// that is a bug in the caller, not bad input.
func (s *Seq) Add(end int64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if end < s.lastEnd {
		panic(fmt.Sprintf("ackseq: Add(%d) after an entry ending at %d; entries must be added in stream order", end, s.lastEnd))
	}
	s.lastEnd = end
	tok := s.base + uint64(len(s.pending))
	s.pending = append(s.pending, entry{end: end})
	return tok
}

// Ack records the fate of the entry with token tok: acknowledged when err
// is nil, failed otherwise. It returns the tokens that joined the
// acknowledged prefix because of this call, in order; the ranges returned
// by all calls are disjoint and, once every entry is acknowledged, cover
// every token. A token that is not outstanding (unknown, or acknowledged
// before) is ignored: it can never move the watermark.
func (s *Seq) Ack(tok uint64, err error) Range {
	s.mu.Lock()
	defer s.mu.Unlock()
	none := Range{From: s.base, To: s.base}
	i := tok - s.base // wraps to a huge value below base: ignored below
	if i >= uint64(len(s.pending)) || s.pending[i].done {
		return none
	}
	s.pending[i].done = true
	if err != nil && s.err == nil {
		s.err = err
	}
	if s.err != nil {
		// Frozen: the failed entry never joins the prefix, so no
		// position past it is ever reported. Waiters are released once
		// nothing is outstanding, so a shutdown does not hang.
		if s.allDoneLocked() {
			s.wakeLocked()
		}
		return none
	}
	n := 0
	for n < len(s.pending) && s.pending[n].done {
		n++
	}
	if n == 0 {
		return none
	}
	r := Range{From: s.base, To: s.base + uint64(n)}
	s.acked = s.pending[n-1].end
	s.base += uint64(n)
	s.pending = s.pending[n:]
	if len(s.pending) == 0 {
		s.pending = nil // let the backing array go; it only grows under load
		s.wakeLocked()
	}
	return r
}

// Acked returns the watermark, the end of the longest acknowledged prefix,
// and the first failed acknowledgement, if any.
func (s *Seq) Acked() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked, s.err
}

// State returns the watermark, the number of entries added and not yet in
// the acknowledged prefix, and the first failure, all as of one moment.
func (s *Seq) State() (acked int64, pending int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked, len(s.pending), s.err
}

// Wait blocks until every entry added so far is acknowledged and returns
// nil, or, after a failure, until every entry has had its Ack and returns
// the failure; or until ctx ends.
func (s *Seq) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, idle, err := len(s.pending), s.idle, s.err
		done := n == 0 || err != nil && s.allDoneLocked()
		s.mu.Unlock()
		if done {
			return err
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// allDoneLocked reports whether every pending entry had its Ack. s.mu must
// be held.
func (s *Seq) allDoneLocked() bool {
	for _, e := range s.pending {
		if !e.done {
			return false
		}
	}
	return true
}

// wakeLocked releases the goroutines in Wait. s.mu must be held.
func (s *Seq) wakeLocked() {
	close(s.idle)
	s.idle = make(chan struct{})
}
