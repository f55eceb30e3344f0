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
// "key=product:42,start=10s,for=30s,share=5%". key and share are
// required; start defaults to 0 and for to the rest of the run. share is
// a percentage and must say so ("5%", "0.5%"): a bare 5 could mean 5% or
// 500%, so it is refused rather than guessed. Every problem names its
// field.
func ParseHotKey(s string) (HotKey, error) {
	h := HotKey{For: forever}
	bad := func(format string, args ...any) (HotKey, error) {
		return HotKey{}, fmt.Errorf("hot key %q: %s (want key=NAME,share=PCT%%[,start=DUR][,for=DUR], e.g. key=product:42,start=10s,for=30s,share=5%%)",
			s, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return bad("%q is not name=value", part)
		}
		if seen[name] {
			return bad("%s is given twice", name)
		}
		seen[name] = true
		switch name {
		case "key":
			if val == "" {
				return bad("key: must not be empty")
			}
			h.Key = val
		case "start", "for":
			d, err := time.ParseDuration(val)
			switch {
			case err != nil:
				return bad("%s: %q is not a duration like 10s or 1m30s", name, val)
			case name == "start" && d < 0:
				return bad("start: %s is negative", val)
			case name == "for" && d <= 0:
				return bad("for: %s is not positive", val)
			case name == "start":
				h.Start = d
			default:
				h.For = d
			}
		case "share":
			p, ok := strings.CutSuffix(val, "%")
			if !ok {
				return bad("share: %q has no %% sign; give a percentage, e.g. share=5%%", val)
			}
			pct, err := strconv.ParseFloat(p, 64)
			switch {
			case err != nil || math.IsNaN(pct) || math.IsInf(pct, 0):
				return bad("share: %q is not a percentage", val)
			case pct <= 0 || pct > 100:
				return bad("share: %s is outside (0%%, 100%%]", val)
			}
			h.Share = pct / 100
		default:
			return bad("unknown field %q (fields: key, share, start, for)", name)
		}
	}
	switch {
	case h.Key == "":
		return bad("key: required")
	case h.Share == 0:
		return bad("share: required")
	}
	return h, nil
}

// forever is the For of a planted key without for=: the rest of the run.
const forever = time.Duration(math.MaxInt64)

// end is when h stops, without overflowing for a key planted forever.
func (h *HotKey) end() time.Duration {
	if h.For > forever-h.Start {
		return forever
	}
	return h.Start + h.For
}

// GenConfig configures synthetic traffic.
type GenConfig struct {
	// Keys is the number of distinct background keys, "key:0" … ; ranks
	// follow Zipf(S): rank r has weight 1/(r+1)^S. 1 to 10M.
	Keys int
	// S is the Zipf exponent; 0 is uniform.
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
	// StopTimeout bounds the wait for Kafka after Run's ctx ended
	// (DeliveryOptions.StopTimeout); Force, when closed, ends it at once.
	// A run that reaches its count or duration waits as long as it takes.
	StopTimeout time.Duration
	Force       <-chan struct{}
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
	if cfg.App == "" {
		cfg.App = "gen"
	}
	switch {
	case cfg.Keys < 1 || cfg.Keys > 10_000_000:
		return nil, fmt.Errorf("gen: keys %d is outside 1..10000000", cfg.Keys)
	case cfg.S < 0 || math.IsNaN(cfg.S) || math.IsInf(cfg.S, 0):
		return nil, errors.New("gen: the Zipf exponent must be a number >= 0 (0: uniform)")
	case cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0):
		return nil, errors.New("gen: rate must be a number >= 0 (0: as fast as possible)")
	case cfg.Count < 0:
		return nil, fmt.Errorf("gen: count %d is negative; 0 means no limit", cfg.Count)
	case cfg.Duration < 0:
		return nil, fmt.Errorf("gen: duration %s is negative; 0 means no limit", cfg.Duration)
	case cfg.Duration == 0 && cfg.Count == 0:
		return nil, errors.New("gen: set a duration or a count")
	}
	// One count is reported per planted key: a key planted twice would
	// print the same merged count twice.
	for i, a := range cfg.Hot {
		for _, b := range cfg.Hot[:i] {
			if a.Key == b.Key {
				return nil, fmt.Errorf("gen: key %q is planted twice; give each --hot its own key", a.Key)
			}
		}
	}
	// Shares may not exceed 1 at any moment: check at every start.
	for _, a := range cfg.Hot {
		sum := 0.0
		for _, b := range cfg.Hot {
			if b.Start <= a.Start && a.Start < b.end() {
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
		if refused(err) {
			g.stats.Failed.Add(1)
		}
		g.mu.Lock()
		if g.err == nil {
			g.err = err
		}
		g.mu.Unlock()
		return
	}
	g.stats.Events.Add(1)
	g.stats.Delivered.Add(1)
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
// waits for Kafka to take what it produced (after ctx ended, at most
// StopTimeout or until Force) and returns the acknowledged count of every
// planted key: the exact number of its events on the topic. Events Kafka
// did not take are not sent again; Run then returns an *UndeliveredError.
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
			if elapsed >= hk.Start && elapsed < hk.end() {
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
	giveUp, cancel := giveUpContext(ctx, g.cfg.StopTimeout, g.cfg.Force)
	defer cancel()
	if g.prod.Flush(giveUp) != nil {
		g.prod.abandon()
		fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = g.prod.Flush(fctx) // every promise has run: the counts are final
		fcancel()
	}
	g.mu.Lock()
	perr := g.err
	g.mu.Unlock()
	if ctx.Err() != nil {
		err = nil // a stop by signal is a clean end
	}
	if perr != nil && !refused(perr) {
		perr = nil // not sent rather than refused: counted as undelivered below
	}
	if n := g.stats.Waiting(); n > 0 {
		g.stats.Undelivered.Add(n)
		err = errors.Join(err, &UndeliveredError{Lines: n, Resume: "gen does not send them again; the planted counts are what is on Kafka"})
	}
	return g.Counts(), errors.Join(err, perr)
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
