package sketch

import "time"

// DefaultWindow is the window length when WindowConfig.Length is zero.
const DefaultWindow = time.Second

// WindowConfig sizes a WindowPair.
type WindowConfig struct {
	// Sketch sizes each of the two Count-Min sketches.
	Sketch CountMinConfig
	// Length is the window length, a whole number of milliseconds. Windows
	// are aligned to multiples of Length since the Unix epoch, so every
	// partition and every replay cuts the same windows. 0 means
	// DefaultWindow.
	Length time.Duration
}

func (c WindowConfig) withDefaults() WindowConfig {
	if c.Length == 0 {
		c.Length = DefaultWindow
	}
	c.Sketch = c.Sketch.withDefaults()
	return c
}

// Validate reports whether the config (after defaults) describes a
// WindowPair this package can build.
func (c WindowConfig) Validate() error {
	c = c.withDefaults()
	if c.Length < time.Millisecond || c.Length%time.Millisecond != 0 {
		return invalidf("window length %v: want a positive whole number of milliseconds", c.Length)
	}
	return c.Sketch.Validate()
}

// WindowPair counts keys over event-time windows with two Count-Min sketches:
// current holds [start, start+Length) and previous the window before it.
// When event time reaches the next window the two swap and the new current is
// cleared, so rotation costs one clear and memory is fixed at two sketches.
//
// Time is always the caller's: the event time of the records being counted,
// in Unix milliseconds (use t.UnixMilli() for a time.Time). Nothing here reads
// the clock, so a replay produces the same counts as the live run.
//
// Build one with NewWindowPair. A WindowPair is not safe for concurrent use.
type WindowPair struct {
	cur, prev *CountMin
	lengthMs  int64
	startMs   int64 // start of the current window
	started   bool
	late      uint64
}

// NewWindowPair builds an empty pair. The first Add or Advance fixes the
// current window to the one containing its event time.
func NewWindowPair(cfg WindowConfig) (*WindowPair, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cur, err := NewCountMin(cfg.Sketch)
	if err != nil {
		return nil, err
	}
	prev, _ := NewCountMin(cfg.Sketch) // same config: cannot fail
	return &WindowPair{cur: cur, prev: prev, lengthMs: cfg.Length.Milliseconds()}, nil
}

// windowStart is the start of the window containing tsMs (floor division, so
// negative times work too).
func (w *WindowPair) windowStart(tsMs int64) int64 {
	s := tsMs - tsMs%w.lengthMs
	if tsMs%w.lengthMs < 0 {
		s -= w.lengthMs
	}
	return s
}

// Advance moves the pair forward to the window containing the event time
// nowMs (Unix ms), for example the partition's watermark on an idle tick,
// and returns how many windows closed (0 if nowMs is still inside the
// current window or earlier). After a return of 1 Previous holds the window
// that just closed; after 2 or more both sketches are empty because the gap
// skipped whole windows.
func (w *WindowPair) Advance(nowMs int64) int64 {
	ws := w.windowStart(nowMs)
	if !w.started {
		w.startMs, w.started = ws, true
		return 0
	}
	if ws <= w.startMs {
		return 0
	}
	closed := (ws - w.startMs) / w.lengthMs
	if closed == 1 {
		w.cur, w.prev = w.prev, w.cur
		w.cur.Reset()
	} else {
		w.cur.Reset()
		w.prev.Reset()
	}
	w.startMs = ws
	return closed
}

// sketchFor returns the sketch an event at tsMs belongs in, advancing first
// if tsMs is past the current window; nil for an event older than previous.
func (w *WindowPair) sketchFor(tsMs int64) *CountMin {
	if !w.started || tsMs >= w.startMs+w.lengthMs {
		w.Advance(tsMs)
	}
	switch {
	case tsMs >= w.startMs:
		return w.cur
	case tsMs >= w.startMs-w.lengthMs:
		return w.prev
	default:
		w.late++
		return nil
	}
}

// Add counts one occurrence of key at event time tsMs (Unix ms). An event in
// the previous window is still counted there; an older one is dropped,
// counted in Late, and Add returns false.
func (w *WindowPair) Add(key string, tsMs int64) bool { return w.AddN(key, 1, tsMs) }

// AddN adds weight n to key at event time tsMs (Unix ms); see Add.
func (w *WindowPair) AddN(key string, n uint64, tsMs int64) bool {
	s := w.sketchFor(tsMs)
	if s == nil {
		return false
	}
	s.add(hashString(key, s.cfg.Seed), n)
	return true
}

// Late is the number of events dropped because they were older than the
// previous window.
func (w *WindowPair) Late() uint64 { return w.late }

// Current is the sketch of the current window. It must not be modified; it
// is reset on rotation, so clone or marshal it to keep it.
func (w *WindowPair) Current() *CountMin { return w.cur }

// Previous is the sketch of the window before the current one.
func (w *WindowPair) Previous() *CountMin { return w.prev }

// CurrentStartMs is the start of the current window in Unix ms (0 before
// the first Add or Advance).
func (w *WindowPair) CurrentStartMs() int64 { return w.startMs }

// Length is the window length.
func (w *WindowPair) Length() time.Duration { return time.Duration(w.lengthMs) * time.Millisecond }

// Bytes is the memory held by both sketches' counters.
func (w *WindowPair) Bytes() int { return w.cur.Bytes() + w.prev.Bytes() }

// Estimate is the upper bound of key's count in the current window.
func (w *WindowPair) Estimate(key string) uint64 { return w.cur.Estimate(key) }

// Rate is key's rate in events (or weight) per second over the current
// window: its estimate divided by the window length. Early in a window it
// under-reads a steady key, because the window has not lasted a whole length
// yet; see SmoothedRate.
func (w *WindowPair) Rate(key string) float64 {
	return float64(w.cur.Estimate(key)) / w.Length().Seconds()
}

// SmoothedRate estimates key's rate in events (or weight) per second over
// the sliding window (nowMs − Length, nowMs], nowMs being event time in Unix
// ms: the current window's count plus the previous window's count weighted
// by the fraction of it still inside the sliding window, divided by the
// window length. It assumes events spread evenly within a window, which
// is exact for a steady key; a key hot across a boundary is then not
// under-counted by up to half as with Rate. It does not modify the pair; if
// nowMs is already past the current window, the current window is weighted
// the same way and previous drops out.
func (w *WindowPair) SmoothedRate(key string, nowMs int64) float64 {
	h := hashString(key, w.cur.cfg.Seed)
	return w.smoothed(w.cur.estimateHash(h), w.prev.estimateHash(h), nowMs)
}

func (w *WindowPair) smoothed(cur, prev uint64, nowMs int64) float64 {
	L := float64(w.lengthMs)
	// Overlap of [now−L, now] with previous [start−L, start) and current
	// [start, start+L), as fractions of L.
	lo := float64(nowMs) - L
	prevW := clamp01((float64(w.startMs) - max(lo, float64(w.startMs)-L)) / L)
	curW := 1.0
	if float64(nowMs) > float64(w.startMs)+L {
		curW = clamp01((float64(w.startMs) + L - lo) / L)
	}
	return (float64(cur)*curW + float64(prev)*prevW) / (L / 1000)
}

func clamp01(x float64) float64 { return min(max(x, 0), 1) }
