package pipeline

import (
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keyheat/keyheat/hotring"
	"github.com/keyheat/keyheat/internal/faststr"
	"github.com/keyheat/keyheat/schemas"
	"github.com/keyheat/keyheat/sketch"
	"github.com/zeebo/xxh3"
)

// Ring lanes: what one touch of a watched key counts.
const (
	// lanePass counts the events at which the key passed its gate. The ring
	// treats a key with no pass in its window as untracked (hotring's cold),
	// so whether a key is tracked depends only on the last window of
	// events, not on how long the partition has run: what makes restarts
	// reproduce alerts exactly (see doc.go).
	lanePass = iota
	laneEvents
	laneBytes
	laneReads
	laneWrites
	lanes
)

// detector is one partition's hot-key detection: per distinct rule window
// a group of slot sketches and a ring, plus a per-app cache of the rules
// that can match.
type detector struct {
	p *Partition
	// rules are the partition's rules as detection applies them: on a
	// topic whose partitions send candidates (Partition.cluster), with
	// the local pre-thresholds (Rules.local).
	rules  *Rules
	groups []*group // by window, shortest first; retired groups drain at the end
	byWin  map[int64]*group
	apps   map[string]*appDet
	last   *appDet
	credit []hotring.Weights
	win    hotring.Window
	sts    []*alertState // scratch for ticks
}

// appDet is what the detector caches per app: its namespace in the rings
// and the rules and whitelist entries its app pattern admits.
type appDet struct {
	app    string
	ns     string // "<len(app)>:<app>", self-delimiting (see hotring's ns+key)
	salt   uint64
	rules  []*rule
	groups []*group // groups[i] counts rules[i]'s keys
	white  []pattern
	all    *rule  // rules[0] when its key pattern matches every key
	allG   *group // groups[0] when all is set
}

// maxDetApps bounds the per-app cache; past it the cache starts over.
const maxDetApps = 1024

// alertBuckets is the size of group.alertBits.
const alertBuckets = 4096

// group counts the keys of every rule with one window length. Time is cut
// into slots of slotMs; the window of a key as of now covers the slots
// (e-S, e] fully and part of slot e-S, e being now's slot: S+1 slots in
// all, the ring's window. Every counted event goes into the Count-Min
// sketch of its slot, so for any key and slot the sketch bounds its count
// from above; a key whose slot estimate passes its rule's gate is admitted
// to the ring credited with every slot's estimate, and from then on the
// ring counts it exactly.
type group struct {
	windowMs, slotMs int64
	slots            int                // S
	cms              []*sketch.CountMin // S+1 slot sketches of counted events, by epoch mod S+1
	bytes            []*sketch.CountMin // the same for bytes; nil when no rule of the group has bytes_rate
	epoch            int64              // slot of the detector's now
	epochMs          int64              // start of that slot
	cur              int                // index of that slot's sketches
	started          bool               // epoch is set
	ring             *hotring.Ring      // exact counts of admitted keys
	rules            map[string]*rule   // the group's current rules by name
	alerts           alertTable
	// alertBits counts the alert states per bucket of the ring hash's top
	// bits: a zero says at a glance that a key has no state, which is the
	// answer for almost every event.
	alertBits [alertBuckets]uint16
	sweep     int  // ring buckets swept per tick
	retired   bool // no rule uses the window any more; kept until its hot keys cooled
	// retiredMs is the event time of the reload that retired the group.
	retiredMs int64
	// steady lets most events of a hot key skip its alert state. A key is
	// steady while its state is hot and not below its threshold since, under
	// the rule that watches it: an event that finds it above changes
	// nothing. observe tags a key's ring node with steady when it leaves
	// the key in that state, and steady moves on (unsteady) whenever any key
	// leaves it, or the rules change: a node tagged with the current value
	// is a steady key's (a new or reset node has tag 0, steady starts at 1).
	steady uint64
}

// unsteady invalidates every steady tag: some key left the steady state.
func (g *group) unsteady() { g.steady++ }

func newDetector(p *Partition) *detector {
	d := &detector{p: p, byWin: map[int64]*group{}, apps: map[string]*appDet{},
		credit: make([]hotring.Weights, p.o.Detect.Slots+1)}
	d.setRules(p.rules)
	return d
}

// setRules makes the groups match r's windows: a window that stays keeps
// its sketches, ring and alert state; a new one starts empty; one no rule
// uses any more is retired.
func (d *detector) setRules(r *Rules) {
	if d.p.cluster {
		r = r.local(d.p.o.Detect.PreThreshold / float64(d.p.src.Partitions))
	}
	d.rules = r
	for _, g := range d.groups {
		g.rules = map[string]*rule{}
		g.retired, g.retiredMs = true, d.p.maxTs
		g.unsteady() // a key's rule may change
	}
	for _, x := range r.rules {
		g := d.byWin[x.windowMs]
		if g == nil {
			g = d.newGroup(x.windowMs)
			d.byWin[x.windowMs] = g
			d.groups = append(d.groups, g)
		}
		g.retired = false
		g.rules[x.name] = x
		if x.bytes > 0 && g.bytes == nil {
			g.bytes = d.newSketches()
		}
	}
	slices.SortFunc(d.groups, func(a, b *group) int {
		if a.retired != b.retired {
			if a.retired {
				return 1
			}
			return -1
		}
		return int(a.windowMs - b.windowMs)
	})
	clear(d.apps)
	d.last = nil
}

// handedOver says how a key hot in retired group g ends its episode
// there. The registry holds one record per app and key, whatever the
// window, so a cooled from the window a reload retired would take a key
// off the registry while the window that watches it now holds it hot. So
// the key is handed over (ends without a record) when a live group holds
// it hot, and is not cooled before readyMs, when every live group has
// counted a whole window since the reload: until then it may be crossing
// there.
func (d *detector) handedOver(g *group, st *alertState) (handed bool, readyMs int64) {
	readyMs = g.retiredMs
	for _, o := range d.groups {
		if o.retired {
			continue
		}
		readyMs = max(readyMs, g.retiredMs+o.windowMs)
		if x := o.lookup(st.hr, st.ns, st.key); x != nil && x.hot {
			return true, readyMs
		}
	}
	return false, readyMs
}

func (d *detector) newSketches() []*sketch.CountMin {
	s := make([]*sketch.CountMin, d.p.o.Detect.Slots+1)
	for i := range s {
		// Conservative update: the admission credits are these estimates,
		// and conservative estimates of a skewed stream are much tighter.
		s[i], _ = sketch.NewCountMin(sketch.CountMinConfig{Depth: d.p.o.Detect.SketchDepth,
			Width: d.p.o.Detect.SketchWidth, Conservative: true}) // validated
	}
	return s
}

func (d *detector) newGroup(windowMs int64) *group {
	o := d.p.o.Detect
	slotMs := windowMs / int64(o.Slots)
	ring, _ := hotring.New(hotring.Options{ // valid by construction
		WindowSlots:        o.Slots + 1,
		WindowSlotDuration: time.Duration(slotMs) * time.Millisecond,
		Lanes:              lanes,
		NodeCap:            2 * o.RingNodes, // sizes the table; admission is capped here, not by the ring
		SingleWriter:       true,            // a partition owns its rings
	})
	g := &group{windowMs: windowMs, slotMs: slotMs, slots: o.Slots, cms: d.newSketches(), ring: ring,
		rules: map[string]*rule{}, steady: 1}
	// Sweep the whole table once per window: a cold key's node is freed at
	// most a window after it went cold.
	g.sweep = max(1, (1<<ring.Options().Bits)/(o.Slots+1))
	if d.p.started {
		g.advance(d.p.maxTs)
	}
	return g
}

// app returns the cached per-app detection state of app.
func (d *detector) app(app string) *appDet {
	if l := d.last; l != nil && (len(app) <= 8 && faststr.EqualShort(l.app, app) || len(app) > 8 && faststr.Equal(l.app, app)) {
		return l
	}
	ad := d.apps[app]
	if ad == nil {
		if len(d.apps) >= maxDetApps {
			clear(d.apps)
		}
		app = cloneString(app)
		ns := strconv.Itoa(len(app)) + ":" + app
		rules, white := d.rules.forApp(app)
		ad = &appDet{app: app, ns: ns, salt: xxh3.HashString(ns), rules: rules, white: white}
		for _, x := range rules {
			ad.groups = append(ad.groups, d.byWin[x.windowMs])
		}
		if len(rules) > 0 && rules[0].key.kind == matchAny {
			ad.all, ad.allG = rules[0], ad.groups[0]
		}
		d.apps[app] = ad
	}
	d.last = ad
	return ad
}

func (ad *appDet) whitelisted(key string) bool {
	for i := range ad.white {
		if ad.white[i].match(key) {
			return true
		}
	}
	return false
}

// match returns the rule watching key and its group, or nil. It inlines
// (allG spares the bounds check that kept it from it): called for every
// event, and most apps' first rule watches every key.
func (ad *appDet) match(key string) (*rule, *group) {
	if ad.all != nil {
		return ad.all, ad.allG
	}
	return ad.matchKey(key)
}

// matchKey is match past a first rule that watches every key.
func (ad *appDet) matchKey(key string) (*rule, *group) {
	for i, x := range ad.rules {
		if x.key.match(key) {
			return x, ad.groups[i]
		}
	}
	return nil, nil
}

// ringHash derives a key's ring and sketch position from its xxh3 hash and
// its app: the same key in two apps is two keys to the detector.
func ringHash(h, salt uint64) uint64 { return mix64(h ^ salt) }

// mix64 is the splitmix64 finalizer, a bijection with full avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// advance moves the group's slots to nowMs's, clearing the sketches of
// the slots that left the window. It reports whether the slot changed.
func (g *group) advance(nowMs int64) bool {
	e := floorDiv(nowMs, g.slotMs)
	if g.started && e <= g.epoch {
		return false
	}
	n := len(g.cms)
	if !g.started || e-g.epoch >= int64(n) {
		for i := range g.cms {
			g.cms[i].Reset()
			if g.bytes != nil {
				g.bytes[i].Reset()
			}
		}
	} else {
		for ep := g.epoch + 1; ep <= e; ep++ {
			i := floorMod(ep, n)
			g.cms[i].Reset()
			if g.bytes != nil {
				g.bytes[i].Reset()
			}
		}
	}
	g.epoch, g.epochMs, g.cur, g.started = e, e*g.slotMs, floorMod(e, n), true
	return true
}

// slotOf returns the slot epoch of tsMs and the index of its sketches, and
// whether the slot is still inside the window. Most events fall in the
// current slot, which needs no division.
func (g *group) slotOf(tsMs int64) (ep int64, i int, ok bool) {
	if tsMs >= g.epochMs {
		return g.epoch, g.cur, true
	}
	ep = floorDiv(tsMs, g.slotMs)
	n := len(g.cms)
	return ep, floorMod(ep, n), ep > g.epoch-int64(n)
}

// process runs detection for one event whose key (truncated) hashes to h:
// it counts the event, admits its key when it passes its rule's gate,
// and updates the key's alert state.
func (d *detector) process(ad *appDet, x *rule, g *group, e *schemas.AccessEvent, key string, h uint64, cls opClass, out *Output) {
	nowMs := d.p.maxTs
	hr := ringHash(h, ad.salt)
	var w hotring.Weights
	counted := x.counts(cls)
	nb := uint64(max(e.Bytes, 0))
	if counted {
		w[laneEvents] = 1
		w[laneBytes] = nb
	}
	switch cls {
	case opRead:
		w[laneReads] = 1
	case opWrite:
		w[laneWrites] = 1
	}
	if _, i, ok := g.slotOf(e.TimeMs); counted && ok {
		if est := g.cms[i].AddHash(hr, 1); x.gateEvents > 0 && est >= x.gateEvents {
			w[lanePass] = 1
		}
		if x.bytes > 0 && nb > 0 {
			if est := g.bytes[i].AddHash(hr, nb); est >= x.gateBytes {
				w[lanePass] = 1
			}
		}
	}
	win := &d.win
	// Most untracked keys have an empty bucket: no call. (The rings run no
	// maintenance that a skipped TouchHash would have run.)
	tracked := false
	if g.ring.MayTrackHash(hr) {
		tracked, _ = g.ring.TouchHash(hr, ad.ns, key, &w, e.TimeMs, nowMs, win)
	}
	if !tracked {
		if w[lanePass] == 0 || !d.admit(g, x, ad, key, hr, e.TimeMs, &w) {
			return
		}
	} else if win.Tag == g.steady && x.alert && x.needEvents > 0 {
		// observe's first test, for the events threshold, here: most
		// events of a skewed stream are of steady keys.
		if hi, lo := g.windowCount(win.Sum[laneEvents], win.Oldest[laneEvents]); hi > 0 || lo >= x.needEvents {
			return
		}
	}
	d.p.observe(g, x, ad, key, h, hr, win, e.TimeMs, out)
}

// admit starts exact counting of a key that passed its gate, crediting
// each slot of its window with the slot sketch's estimate (an upper bound
// of what the key had there; the current event is in it already), so its
// count never falls below the truth. It reports whether the key was
// admitted. The ring holds at most 2 × RingNodes keys:
//
//   - below RingNodes keys, every key that passed its gate is admitted;
//   - from RingNodes on, only a key whose estimate over the window reaches
//     half its threshold;
//   - at 2 × RingNodes, only a key whose estimate reaches its threshold,
//     in place of the tracked key with the smallest count, if that count
//     is smaller (as Space-Saving does). Keys with smaller estimates
//     cannot churn the ring. On an unkeyed topic thousands of keys may
//     reach their (local) threshold; the ring then answers the sweep and
//     the lowest key from what its last walk found in the slot, not from
//     a walk each (hotring's memo).
func (d *detector) admit(g *group, x *rule, ad *appDet, key string, hr uint64, tsMs int64, w *hotring.Weights) bool {
	n := len(g.cms)
	var sumE, sumB uint64
	for k := range n {
		i := floorMod(g.epoch-int64(k), n)
		c := &d.credit[k]
		*c = hotring.Weights{}
		c[laneEvents] = g.cms[i].EstimateHash(hr)
		sumE += c[laneEvents]
		if x.bytes > 0 {
			c[laneBytes] = g.bytes[i].EstimateHash(hr)
			sumB += c[laneBytes]
		}
	}
	if k := g.epoch - floorDiv(tsMs, g.slotMs); k >= 0 && k < int64(n) {
		c := &d.credit[k]
		c[lanePass] = 1
		c[laneReads] += w[laneReads]
		c[laneWrites] += w[laneWrites]
	}
	soft := d.p.o.Detect.RingNodes
	if size := g.ring.Len(); size >= soft {
		reaches := func(div uint64) bool {
			return (x.needEvents > 0 && mulGE(sumE, uint64(g.slotMs), x.needEvents/div)) ||
				(x.needBytes > 0 && mulGE(sumB, uint64(g.slotMs), x.needBytes/div))
		}
		switch {
		case size < 2*soft && reaches(2):
		case reaches(1) && g.ring.SweepCold(d.p.maxTs, 1<<30) > 0:
		case reaches(1) && g.ring.EvictLowest(d.p.maxTs, laneEvents, sumE):
			d.p.stats.RingEvicted++
		default:
			d.p.stats.RingRefused++
			return false
		}
	}
	g.ring.InsertHash(hr, ad.ns, key, d.credit, d.p.maxTs, &d.win)
	d.p.stats.RingAdmitted++
	return true
}

// tick runs at the first event (or idle advance) of every new slot: it
// reads the window of every key with alert state, which cools hot keys
// that no longer get events, and sweeps part of the ring.
func (d *detector) tick(out *Output) {
	nowMs := d.p.maxTs
	kept := d.groups[:0]
	for _, g := range d.groups {
		if !g.advance(nowMs) {
			kept = append(kept, g)
			continue
		}
		d.p.tickAlerts(g, out)
		if d.p.cluster {
			d.p.candidates(g, out)
		}
		g.ring.SweepCold(nowMs, g.sweep)
		if g.retired && g.alerts.len() == 0 {
			delete(d.byWin, g.windowMs)
			continue
		}
		kept = append(kept, g)
	}
	clear(d.groups[len(kept):])
	d.groups = kept
}

// windowCount is the count a key's decisions use, scaled by slotMs (the
// unit of a rule's thresholds): its events in the window's slots after
// the oldest, up to now. They all lie in the window (now − W, now], so
// the count is a lower bound of the key's count there (credits aside);
// the oldest slot, partly inside, is left out rather than taken pro rata:
// log timestamps of whole seconds put a second's events at the first
// millisecond of a slot, and a share of them "still inside" made a key
// at half its rate look at its rate, for ever. It is 128 bits wide so
// that no count overflows.
func (g *group) windowCount(sum, oldest uint64) (hi, lo uint64) {
	return bits.Mul64(sum-oldest, uint64(g.slotMs))
}

// mulGE reports whether a × b ≥ c without overflow.
func mulGE(a, b, c uint64) bool {
	hi, lo := bits.Mul64(a, b)
	return hi > 0 || lo >= c
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func floorMod(a int64, n int) int {
	m := int(a % int64(n))
	if m < 0 {
		m += n
	}
	return m
}

// cloneString copies s, so that state kept beyond the event does not pin
// the decoded batch the event's strings point into.
func cloneString(s string) string { return strings.Clone(s) }
