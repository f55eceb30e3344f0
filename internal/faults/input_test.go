//go:build !race

package faults

import (
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"
	"time"
)

// The input: JSON access lines appended to a file that `ingest tail`
// follows. Line n has event time baseMs + n*stepMs and its own number in
// its bytes field, so every reader can tell which lines it has, and the
// suite counts what it wrote: per window, and per planted hot key.

const (
	// windowMs is detect's report window (its default, 1 s).
	windowMs = 1000
	// perWindow lines fall in each window; a unit of perUnit of them is
	// written at once, every tick.
	perWindow = 200
	perUnit   = 100
	stepMs    = windowMs / perWindow
	tick      = 125 * time.Millisecond
	// backgroundKeys are the keys lines cycle through when no planted
	// key takes them: one line per key per window, far below hotRate.
	backgroundKeys = 5000
	// plantWindows is how many consecutive windows a planted key takes
	// every other line of by default: perWindow/2 events a second, above
	// hotRate.
	plantWindows = 3
	// hotRate is the rule's rate (events/s) detect runs with.
	hotRate = 60
	app     = "shop"
)

// plant is a hot key the suite planted: it has every other line of
// windows [from, to).
type plant struct {
	key      string
	from, to int64 // window numbers
}

// snapshot is what the suite wrote up to a pause.
type snapshot struct {
	lines   int64            // lines 0..lines-1 were written
	windows map[int64]uint64 // window start (ms) → lines
	hot     map[string]map[int64]uint64
	plants  []plant
	// open is the start of the window of the last line written: no later
	// event closes it, so it is in no report yet; every window before it
	// is closed on every partition (each unit spreads over every one).
	open int64
}

// input writes the lines. pause and resume bracket the checks.
type input struct {
	path   string
	baseMs int64

	mu      sync.Mutex
	f       *os.File
	n       int64
	windows map[int64]uint64
	hot     map[string]map[int64]uint64
	plants  []plant
	queued  []plant // from and to relative to the window it starts in
	paused  bool
	resumed chan struct{}

	stopc    chan struct{}
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

func newInput(path string, baseMs int64) (*input, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &input{path: path, baseMs: baseMs, f: f, windows: map[int64]uint64{}, hot: map[string]map[int64]uint64{},
		resumed: make(chan struct{}), stopc: make(chan struct{}), done: make(chan error, 1)}, nil
}

// start writes a unit every tick until stop.
func (in *input) start() {
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-in.stopc:
				in.done <- in.f.Close()
				return
			case <-t.C:
			}
			if err := in.writeUnit(); err != nil {
				in.done <- err
				return
			}
		}
	}()
}

// stop ends the writer and returns its error, if it failed. It may be
// called again.
func (in *input) stop() error {
	in.stopOnce.Do(func() {
		close(in.stopc)
		in.stopErr = <-in.done
	})
	return in.stopErr
}

// plantKey asks for key to be planted in the next windows not planted
// yet, for the given number of windows.
func (in *input) plantKey(key string, windows int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.queued = append(in.queued, plant{key: key, to: windows})
}

func (in *input) writeUnit() error {
	in.mu.Lock()
	for in.paused {
		c := in.resumed
		in.mu.Unlock()
		select {
		case <-c:
		case <-in.stopc:
			return nil
		}
		in.mu.Lock()
	}
	defer in.mu.Unlock()
	buf := make([]byte, 0, perUnit*100)
	for range perUnit {
		n := in.n
		w := n / perWindow
		if n%perWindow == 0 && len(in.queued) > 0 && (len(in.plants) == 0 || in.plants[len(in.plants)-1].to <= w) {
			in.plants = append(in.plants, plant{key: in.queued[0].key, from: w, to: w + in.queued[0].to})
			in.queued = in.queued[1:]
		}
		key := "k:" + strconv.FormatInt(n%backgroundKeys, 10)
		tsMs := in.baseMs + n*stepMs
		start := tsMs - tsMs%windowMs
		if len(in.plants) > 0 {
			if p := in.plants[len(in.plants)-1]; w >= p.from && w < p.to && n%2 == 0 {
				key = p.key
				if in.hot[key] == nil {
					in.hot[key] = map[int64]uint64{}
				}
				in.hot[key][start]++
			}
		}
		buf = fmt.Appendf(buf, `{"time":%d,"key":%q,"app":%q,"op":"GET","bytes":%d}`+"\n", tsMs, key, app, n)
		in.windows[start]++
		in.n++
	}
	// One write of whole lines: the tail never sees half a unit as the
	// file's end for long.
	_, err := in.f.Write(buf)
	return err
}

// pause stops the writer after the unit it is writing and returns what
// was written; resume lets it go on.
func (in *input) pause() snapshot {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.paused {
		in.paused = true
		in.resumed = make(chan struct{})
	}
	s := snapshot{lines: in.n, windows: maps.Clone(in.windows), hot: map[string]map[int64]uint64{}, plants: append([]plant(nil), in.plants...)}
	for k, v := range in.hot {
		s.hot[k] = maps.Clone(v)
	}
	last := in.baseMs + (in.n-1)*stepMs
	s.open = last - last%windowMs
	return s
}

func (in *input) resume() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.paused {
		in.paused = false
		close(in.resumed)
	}
}

// closedWindows returns the windows before the open one, start → lines.
func (s snapshot) closedWindows() map[int64]uint64 {
	out := map[int64]uint64{}
	for start, n := range s.windows {
		if start < s.open {
			out[start] = n
		}
	}
	return out
}

// donePlants returns the planted keys whose windows are all closed.
func (s snapshot) donePlants(baseMs int64) []plant {
	var out []plant
	for _, p := range s.plants {
		if end := baseMs + p.to*windowMs; end <= s.open {
			out = append(out, p)
		}
	}
	return out
}
