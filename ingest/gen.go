package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// HotKey is a key planted into generated traffic: during [Start,
// Start+For) of the run, a Share of all events are this key.
type HotKey struct {
	Key   string
	Start time.Duration
	For   time.Duration
	Share float64 // 0 < Share <= 1
}

// ParseHotKey reads the --hot flag syntax:
// "key=product:42,start=10s,for=30s,share=5%" (share also as 0.05).
func ParseHotKey(s string) (HotKey, error) {
	var h HotKey
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return h, fmt.Errorf("hot key %q: %q is not name=value", s, part)
		}
		var err error
		switch name {
		case "key":
			h.Key = val
		case "start":
			h.Start, err = time.ParseDuration(val)
		case "for":
			h.For, err = time.ParseDuration(val)
		case "share":
			if p, ok := strings.CutSuffix(val, "%"); ok {
				h.Share, err = strconv.ParseFloat(p, 64)
				h.Share /= 100
			} else {
				h.Share, err = strconv.ParseFloat(val, 64)
			}
		default:
			return h, fmt.Errorf("hot key %q: unknown field %q (want key, start, for, share)", s, name)
		}
		if err != nil {
			return h, fmt.Errorf("hot key %q: %s: %w", s, name, err)
		}
	}
	switch {
	case h.Key == "":
		return h, fmt.Errorf("hot key %q: key= is required", s)
	case h.Start < 0 || h.For <= 0:
		return h, fmt.Errorf("hot key %q: start must be >= 0 and for > 0", s)
	case !(h.Share > 0 && h.Share <= 1):
		return h, fmt.Errorf("hot key %q: share must be in (0%%, 100%%]", s)
	}
	return h, nil
}

// GenConfig configures synthetic traffic.
type GenConfig struct {
	// Keys is the number of distinct background keys, "key:0" … ; ranks
	// follow Zipf(S): rank r has weight 1/(r+1)^S. Default 100000, at most 10M.
	Keys int
	// S is the Zipf exponent; 0 is uniform. Default 1.1.
	S float64
	// Rate is events per second; 0 produces as fast as possible. With a
	// rate, event times are exactly i/Rate after the start, so a run is
	// reproducible from its seed; without, they are the wall clock.
	Rate float64
	// Duration and Count stop the run, whichever comes first; at least
	// one must be set.
	Duration time.Duration
	Count    int64
	// Seed makes the run reproducible.
	Seed uint64
	// Hot are the planted keys. Their shares at any moment must sum to
	// at most 1.
	Hot []HotKey
	// App is every event's app; default "gen".
	App string
	// Start is the event time of the first event; zero means now.
	Start time.Time
}

// Gen produces synthetic AccessEvents with planted hot keys.
type Gen struct {
	cfg   GenConfig
	prod  *Producer
	stats *Stats
	zipf  []aliasSlot // Walker/Vose alias table over the key ranks
	keys  []string

	counts []atomic.Int64 // acknowledged events per planted key
	mu     sync.Mutex
	err    error
}

// NewGen validates cfg and precomputes the Zipf table.
func NewGen(cfg GenConfig, prod *Producer, stats *Stats) (*Gen, error) {
	if cfg.Keys == 0 {
		cfg.Keys = 100_000
	}
	if cfg.S == 0 {
		cfg.S = 1.1
	}
	if cfg.App == "" {
		cfg.App = "gen"
	}
	switch {
	case cfg.Keys < 1 || cfg.Keys > 10_000_000:
		return nil, fmt.Errorf("gen: keys %d is outside 1..10000000", cfg.Keys)
	case cfg.S < 0 || math.IsNaN(cfg.S):
		return nil, errors.New("gen: the Zipf exponent must be >= 0")
	case cfg.Rate < 0:
		return nil, errors.New("gen: rate must be >= 0 (0: as fast as possible)")
	case cfg.Duration <= 0 && cfg.Count <= 0:
		return nil, errors.New("gen: set a duration or a count")
	}
	// Shares may not exceed 1 at any moment: check at every start.
	for _, a := range cfg.Hot {
		sum := 0.0
		for _, b := range cfg.Hot {
			if b.Start <= a.Start && a.Start < b.Start+b.For {
				sum += b.Share
			}
		}
		if sum > 1+1e-9 {
			return nil, fmt.Errorf("gen: planted shares add up to %.0f%% at %s", sum*100, a.Start)
		}
	}
	if stats == nil {
		stats = NewStats(nil)
	}
	g := &Gen{cfg: cfg, prod: prod, stats: stats, counts: make([]atomic.Int64, len(cfg.Hot))}
	w := make([]float64, cfg.Keys)
	for r := range w {
		w[r] = math.Pow(float64(r+1), -cfg.S)
	}
	g.zipf = newAlias(w)
	if cfg.Keys <= 1<<20 {
		g.keys = make([]string, cfg.Keys)
		for r := range g.keys {
			g.keys[r] = "key:" + strconv.Itoa(r)
		}
	}
	return g, nil
}

// Ack implements Acker: seq is the planted key's index + 1, or 0.
func (g *Gen) Ack(seq uint64, err error) {
	if err != nil {
		g.stats.Failed.Add(1)
		g.mu.Lock()
		if g.err == nil {
			g.err = err
		}
		g.mu.Unlock()
		return
	}
	g.stats.Events.Add(1)
	if seq > 0 {
		g.counts[seq-1].Add(1)
	}
}

// Counts returns the acknowledged count of every planted key.
func (g *Gen) Counts() map[string]int64 {
	out := make(map[string]int64, len(g.cfg.Hot))
	for i, h := range g.cfg.Hot {
		out[h.Key] += g.counts[i].Load()
	}
	return out
}

// Run generates until the count or duration is reached or ctx ends, then
// flushes and returns the acknowledged count of every planted key: the
// exact number of its events on the topic.
func (g *Gen) Run(ctx context.Context) (map[string]int64, error) {
	rng := rand.New(rand.NewPCG(g.cfg.Seed, g.cfg.Seed^0x9e3779b97f4a7c15))
	start := g.cfg.Start
	if start.IsZero() {
		start = time.Now()
	}
	real0 := time.Now()
	idPrefix := schemas.RecordID{Kind: schemas.IDGen, Seed: g.cfg.Seed}.Prefix()
	var e schemas.AccessEvent
	var err error
	var elapsed time.Duration
	var pending int64 // events produced but not yet added to stats.Lines
	for i := int64(0); g.cfg.Count <= 0 || i < g.cfg.Count; i++ {
		if g.cfg.Rate > 0 {
			elapsed = time.Duration(float64(i) / g.cfg.Rate * float64(time.Second))
			if i%1024 == 0 {
				if ahead := elapsed - time.Since(real0); ahead > time.Millisecond {
					select {
					case <-ctx.Done():
					case <-time.After(ahead):
					}
				}
			}
		} else if i%256 == 0 {
			elapsed = time.Since(real0)
		}
		if g.cfg.Duration > 0 && elapsed >= g.cfg.Duration {
			break
		}
		if i%256 == 0 && ctx.Err() != nil {
			break
		}
		e = schemas.AccessEvent{TimeMs: start.Add(elapsed).UnixMilli(), App: g.cfg.App, Op: "GET",
			Bytes: 100 + int64(rng.IntN(900)), Client: "gen"}
		if rng.IntN(10) == 0 {
			e.Op = "SET"
		}
		seq := uint64(0)
		u := rng.Float64()
		for h := range g.cfg.Hot {
			hk := &g.cfg.Hot[h]
			if elapsed >= hk.Start && elapsed < hk.Start+hk.For {
				if u < hk.Share {
					e.Key, seq = hk.Key, uint64(h+1)
					break
				}
				u -= hk.Share
			}
		}
		if seq == 0 {
			r := drawAlias(g.zipf, rng.Uint64())
			if g.keys != nil {
				e.Key = g.keys[r]
			} else {
				e.Key = "key:" + strconv.Itoa(r)
			}
			// A background key with a planted key's name counts too.
			for h := range g.cfg.Hot {
				if g.cfg.Hot[h].Key == e.Key {
					seq = uint64(h + 1)
				}
			}
		}
		if err = g.prod.Event(ctx, &e, idPrefix, i, g, seq); err != nil {
			break
		}
		// Counted in steps: one atomic add per event on a line the
		// progress reader also touches costs more than the event's Zipf draw.
		if pending++; pending == 256 {
			g.stats.Lines.Add(pending)
			pending = 0
		}
	}
	g.stats.Lines.Add(pending)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	ferr := g.prod.Flush(fctx)
	g.mu.Lock()
	perr := g.err
	g.mu.Unlock()
	if ctx.Err() != nil {
		err = nil // a stop by signal is a clean end
	}
	if errors.Is(perr, context.Canceled) {
		perr = nil
	}
	return g.Counts(), errors.Join(err, ferr, perr)
}

// aliasSlot is one column of an alias table: rank i is drawn when the
// draw's fraction is below keep, its alias otherwise. One column fits in
// 8 bytes, so a draw is one random number and one cache line, instead of
// a binary search over a CDF that misses the cache on every step for a
// large key space.
type aliasSlot struct {
	keep  uint32 // probability of keeping the column's own rank, scaled to 2^32
	alias uint32
}

// newAlias builds the alias table of weights w (Vose's method).
func newAlias(w []float64) []aliasSlot {
	n := len(w)
	total := 0.0
	for _, x := range w {
		total += x
	}
	t := make([]aliasSlot, n)
	p := make([]float64, n)
	small, large := make([]int, 0, n), make([]int, 0, n)
	for i, x := range w {
		p[i] = x * float64(n) / total
		if p[i] < 1 {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		t[s] = aliasSlot{keep: uint32(math.Min(p[s]*(1<<32), math.MaxUint32)), alias: uint32(l)}
		p[l] -= 1 - p[s]
		if p[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	// Left-overs are 1 up to rounding: they always keep their own rank.
	for _, i := range append(small, large...) {
		t[i] = aliasSlot{keep: math.MaxUint32, alias: uint32(i)}
	}
	return t
}

// drawAlias maps one uniform 64-bit number to a rank: the high half picks
// a column (multiply-shift, no division), the low half decides between
// the column's rank and its alias.
func drawAlias(t []aliasSlot, u uint64) int {
	col := int((u >> 32) * uint64(len(t)) >> 32)
	s := t[col]
	if uint32(u) < s.keep {
		return col
	}
	return int(s.alias)
}
