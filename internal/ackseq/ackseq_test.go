package ackseq

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// op is one step of a table case: add an entry ending at end, or ack a
// token (with fail, as a failure).
type op struct {
	add  bool
	end  int64
	tok  uint64
	fail bool
	// After the step: the watermark, whether a failure is recorded, and
	// for an ack the tokens it moved into the prefix.
	acked  int64
	failed bool
	joined Range
}

func add(end, acked int64) op { return op{add: true, end: end, acked: acked} }
func ack(tok uint64, acked int64, from, to uint64) op {
	return op{tok: tok, acked: acked, joined: Range{from, to}}
}
func fail(tok uint64, acked int64, base uint64) op {
	return op{tok: tok, fail: true, acked: acked, failed: true, joined: Range{base, base}}
}

func TestSeq(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		start int64
		ops   []op
	}{
		{"in order", 0, []op{add(10, 0), add(25, 0), ack(0, 10, 0, 1), ack(1, 25, 1, 2)}},
		{"out of order waits for the gap", 100, []op{add(110, 100), add(120, 100), add(130, 100),
			ack(2, 100, 0, 0), ack(1, 100, 0, 0), ack(0, 130, 0, 3)}},
		{"gap in the middle", 0, []op{add(1, 0), add(2, 0), add(3, 0),
			ack(0, 1, 0, 1), ack(2, 1, 1, 1), ack(1, 3, 1, 3)}},
		{"kafka offsets: entry of offset o ends at o+1", 41, []op{add(42, 41), add(45, 41), add(46, 41),
			ack(1, 41, 0, 0), ack(0, 45, 0, 2), ack(2, 46, 2, 3)}},
		{"empty entries (a skipped line) still count", 0, []op{add(5, 0), add(5, 0), ack(1, 0, 0, 0), ack(0, 5, 0, 2)}},
		{"double ack is ignored", 0, []op{add(1, 0), add(2, 0), ack(1, 0, 0, 0), ack(1, 0, 0, 0), ack(0, 2, 0, 2), ack(0, 2, 2, 2)}},
		{"unknown token is ignored", 0, []op{add(1, 0), ack(7, 0, 0, 0), ack(1, 0, 0, 0), ack(0, 1, 0, 1)}},
		{"failure freezes below the failed entry", 0, []op{add(1, 0), add(2, 0), add(3, 0),
			ack(0, 1, 0, 1), fail(1, 1, 1), {tok: 2, acked: 1, failed: true, joined: Range{1, 1}}}},
		{"failure of the first entry", 7, []op{add(8, 7), fail(0, 7, 0), {add: true, end: 9, acked: 7, failed: true},
			{tok: 1, acked: 7, failed: true, joined: Range{0, 0}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.start)
			for i, o := range tc.ops {
				var joined Range
				if o.add {
					s.Add(o.end)
				} else {
					var err error
					if o.fail {
						err = boom
					}
					joined = s.Ack(o.tok, err)
					require.Equal(t, o.joined, joined, "step %d: tokens joined", i)
				}
				acked, err := s.Acked()
				require.Equal(t, o.acked, acked, "step %d: watermark", i)
				require.Equal(t, o.failed, err != nil, "step %d: failure recorded (err %v)", i, err)
			}
		})
	}
}

func TestAddOutOfOrderPanics(t *testing.T) {
	s := New(10)
	require.PanicsWithValue(t, "ackseq: Add(9) after an entry ending at 10; entries must be added in stream order", func() { s.Add(9) })
	s.Add(20)
	require.Panics(t, func() { s.Add(19) })
}

func TestWait(t *testing.T) {
	ctx := context.Background()
	s := New(0)
	require.NoError(t, s.Wait(ctx), "nothing pending")

	a, b := s.Add(1), s.Add(2)
	done := make(chan error, 1)
	go func() { done <- s.Wait(ctx) }()
	s.Ack(b, nil)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v with entry %d outstanding", err, a)
	default:
	}
	s.Ack(a, nil)
	require.NoError(t, <-done)

	// After a failure Wait returns it once every entry had its Ack.
	boom := errors.New("boom")
	c, d := s.Add(3), s.Add(4)
	go func() { done <- s.Wait(ctx) }()
	s.Ack(c, boom)
	s.Ack(d, nil)
	require.ErrorIs(t, <-done, boom)

	// A context ends the wait.
	s2 := New(0)
	s2.Add(1)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s2.Wait(cctx), context.Canceled)
}

func TestState(t *testing.T) {
	s := New(3)
	acked, pending, err := s.State()
	require.Equal(t, []any{int64(3), 0, nil}, []any{acked, pending, err})
	s.Add(4)
	tok := s.Add(9)
	s.Ack(tok, nil)
	acked, pending, err = s.State()
	require.Equal(t, []any{int64(3), 2, nil}, []any{acked, pending, err}, "an ack past a gap leaves both entries pending")
}

// model is the obvious implementation: every entry ever added, and which
// are acknowledged.
type model struct {
	start  int64
	ends   []int64
	done   []bool
	failed bool
	prefix int // entries in the acknowledged prefix
}

func (m *model) add(end int64) uint64 {
	m.ends = append(m.ends, end)
	m.done = append(m.done, false)
	return uint64(len(m.ends) - 1)
}

func (m *model) ack(tok uint64, fail bool) Range {
	from := uint64(m.prefix)
	if tok >= uint64(len(m.ends)) || m.done[tok] {
		return Range{from, from}
	}
	m.done[tok] = true
	m.failed = m.failed || fail
	if m.failed {
		return Range{from, from}
	}
	for m.prefix < len(m.done) && m.done[m.prefix] {
		m.prefix++
	}
	return Range{from, uint64(m.prefix)}
}

func (m *model) acked() int64 {
	if m.prefix == 0 {
		return m.start
	}
	return m.ends[m.prefix-1]
}

// TestSeqMatchesModel drives a Seq and the model with the same random
// operations (adds with gaps and empty entries, acks in any order, repeats,
// unknown tokens, rare failures) and checks they agree after every step.
func TestSeqMatchesModel(t *testing.T) {
	boom := errors.New("boom")
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 99))
		start := rng.Int64N(1000)
		s, m := New(start), &model{start: start}
		end := start
		for step := range 200 {
			switch r := rng.IntN(10); {
			case r < 4:
				end += rng.Int64N(3) // 0: an empty entry
				require.Equal(t, m.add(end), s.Add(end), "seed %d step %d: token", seed, step)
			default:
				tok := uint64(rng.IntN(len(m.ends) + 2)) // sometimes unknown
				fail := rng.IntN(100) == 0
				var err error
				if fail {
					err = boom
				}
				require.Equal(t, m.ack(tok, fail), s.Ack(tok, err), "seed %d step %d: ack %d joined", seed, step, tok)
			}
			acked, pending, err := s.State()
			require.Equal(t, m.acked(), acked, "seed %d step %d: watermark", seed, step)
			require.Equal(t, len(m.ends)-m.prefix, pending, "seed %d step %d: pending", seed, step)
			require.Equal(t, m.failed, err != nil, "seed %d step %d: failed", seed, step)
		}
	}
}

// TestSeqConcurrent adds from one goroutine while several others
// acknowledge in random order and a reader watches the watermark: the
// watermark never goes back, the ranges Ack returns cover every token
// exactly once, and at the end the watermark is the last end.
func TestSeqConcurrent(t *testing.T) {
	const n, ackers = 20_000, 4
	s := New(0)
	toks := make(chan uint64, 64)
	var wg sync.WaitGroup
	joined := make([][]Range, ackers)
	for a := range ackers {
		wg.Go(func() {
			var held []uint64
			rng := rand.New(rand.NewPCG(uint64(a), 1))
			flush := func() {
				rng.Shuffle(len(held), func(i, j int) { held[i], held[j] = held[j], held[i] })
				for _, tok := range held {
					if r := s.Ack(tok, nil); r.Len() > 0 {
						joined[a] = append(joined[a], r)
					}
				}
				held = held[:0]
			}
			for tok := range toks {
				if held = append(held, tok); len(held) == 8 {
					flush()
				}
			}
			flush()
		})
	}
	stop := make(chan struct{})
	var readerErr error
	var rwg sync.WaitGroup
	rwg.Go(func() {
		last := int64(0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			acked, _ := s.Acked()
			if acked < last {
				readerErr = errors.New("watermark went back")
				return
			}
			last = acked
		}
	})
	for i := range n {
		toks <- s.Add(int64(i+1) * 3)
	}
	close(toks)
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	require.NoError(t, s.Wait(ctx))
	close(stop)
	rwg.Wait()
	require.NoError(t, readerErr)
	acked, err := s.Acked()
	require.NoError(t, err)
	require.EqualValues(t, n*3, acked)
	covered := make([]int, n)
	for _, rs := range joined {
		for _, r := range rs {
			for tok := r.From; tok < r.To; tok++ {
				covered[tok]++
			}
		}
	}
	for tok, c := range covered {
		require.Equal(t, 1, c, "token %d joined the prefix %d times", tok, c)
	}
}
