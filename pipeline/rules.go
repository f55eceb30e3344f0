package pipeline

import (
	"math"
	"slices"
	"time"
)

// Rules is a compiled RuleSet: what decides, per event, whether its key is
// watched, by which rule, whether it is whitelisted, and whether the event
// is a read or a write. It is immutable and safe for concurrent use, so
// one Rules can serve every partition (SetRules) and the merger
// (Threshold).
type Rules struct {
	set   RuleSet // as given, for Set
	slots int     // DetectOptions.Slots it was compiled for
	gate  float64
	rules []*rule
	white []keyMatcher
	ops   opClassifier
}

// rule is a compiled Rule. Thresholds are kept as integers scaled by the
// slot length so the per-event comparison is exact integer arithmetic (see
// group.count).
type rule struct {
	name     string
	idx      int // position in the RuleSet
	key, app pattern
	windowMs int64
	slotMs   int64
	rate     float64 // events/s, 0 = none
	bytes    float64 // bytes/s, 0 = none
	ops      string
	counted  uint8 // bit c set: events of opClass c count toward the rule
	alert    bool
	// needEvents and needBytes are the thresholds over the window, times
	// slotMs, rounded up: a key is hot when its window count × slotMs
	// reaches one of them. 0 means the rule sets no such threshold.
	needEvents, needBytes uint64
	// gateEvents and gateBytes are the per-slot estimates that admit a key
	// to exact counting; 0 means no gate on that measure.
	gateEvents, gateBytes uint64
	// upper: the rule's cluster alerts compare the upper bound (see
	// Rule.ClusterBound).
	upper bool
}

type keyMatcher struct{ app, key pattern }

// NewRules compiles o's RuleSet for partitions built with o's
// DetectOptions. It validates o first.
func NewRules(o Options) (*Rules, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := o.RuleSet
	r := &Rules{
		set: RuleSet{
			Rules:     slices.Clone(s.Rules),
			Whitelist: slices.Clone(s.Whitelist),
			ReadOps:   slices.Clone(s.ReadOps),
			WriteOps:  slices.Clone(s.WriteOps),
		},
		slots: o.Detect.Slots,
		gate:  o.Detect.Gate,
		ops:   newOpClassifier(s.ReadOps, s.WriteOps),
	}
	for i, x := range s.Rules {
		key, _ := compilePattern(x.Key) // validated
		app, _ := compilePattern(x.App)
		w := x.Window.Milliseconds()
		slot := w / int64(o.Detect.Slots)
		ops := x.Ops
		if ops == "" {
			ops = OpsAll
		}
		cr := &rule{name: x.Name, idx: i, key: key, app: app, windowMs: w, slotMs: slot,
			rate: x.Rate, bytes: x.BytesRate, ops: ops, counted: countedClasses(ops), alert: x.alerts(),
			upper: x.ClusterBound != BoundLower}
		cr.needEvents, cr.gateEvents = thresholds(x.Rate, w, slot, o.Detect.Gate)
		cr.needBytes, cr.gateBytes = thresholds(x.BytesRate, w, slot, o.Detect.Gate)
		r.rules = append(r.rules, cr)
	}
	for _, w := range s.Whitelist {
		key, _ := compilePattern(w.Key)
		app, _ := compilePattern(w.App)
		r.white = append(r.white, keyMatcher{app: app, key: key})
	}
	return r, nil
}

// thresholds turns a rate per second into the scaled window threshold and
// the per-slot gate (at least 1), both 0 for a rate of 0. Validate keeps
// rate × window below 2^52, so the products are exact enough and fit.
func thresholds(rate float64, windowMs, slotMs int64, gate float64) (need, gateN uint64) {
	if rate == 0 {
		return 0, 0
	}
	need = uint64(math.Ceil(rate * float64(windowMs) / 1000 * float64(slotMs)))
	gateN = max(1, uint64(math.Ceil(gate*rate*float64(slotMs)/1000)))
	return need, gateN
}

// local returns r with every rate and bytes rate multiplied by f: the
// local pre-thresholds a partition of a topic not keyed by access key
// detects its candidates with (see DetectOptions.PreThreshold). Names,
// patterns, windows and ops stay; r is not changed.
func (r *Rules) local(f float64) *Rules {
	l := *r
	l.rules = make([]*rule, len(r.rules))
	for i, x := range r.rules {
		y := *x
		y.rate, y.bytes = x.rate*f, x.bytes*f
		y.needEvents, y.gateEvents = thresholds(y.rate, y.windowMs, y.slotMs, r.gate)
		y.needBytes, y.gateBytes = thresholds(y.bytes, y.windowMs, y.slotMs, r.gate)
		l.rules[i] = &y
	}
	return &l
}

// byName returns the rule named name, or nil.
func (r *Rules) byName(name string) *rule {
	for _, x := range r.rules {
		if x.name == name {
			return x
		}
	}
	return nil
}

// Set returns the RuleSet r was compiled from.
func (r *Rules) Set() RuleSet { return r.set }

// Threshold returns the events-per-second threshold of the rule watching
// key of app, the rule a Partition would pick. ok is false when no rule
// watches the key, the key is whitelisted, or its rule sets only a bytes
// threshold.
func (r *Rules) Threshold(app, key string) (ratePerS float64, ok bool) {
	if r.whitelisted(app, key) {
		return 0, false
	}
	for _, x := range r.rules {
		if x.app.match(app) && x.key.match(key) {
			return x.rate, x.rate > 0
		}
	}
	return 0, false
}

func (r *Rules) whitelisted(app, key string) bool {
	for i := range r.white {
		if r.white[i].app.match(app) && r.white[i].key.match(key) {
			return true
		}
	}
	return false
}

// forApp returns the rules whose app pattern matches app, in order, and
// the whitelist entries that do: a partition caches them per app so that
// an event only tests key patterns.
func (r *Rules) forApp(app string) (rules []*rule, white []pattern) {
	for _, x := range r.rules {
		if x.app.match(app) {
			rules = append(rules, x)
		}
	}
	for _, w := range r.white {
		if w.app.match(app) {
			white = append(white, w.key)
		}
	}
	return rules, white
}

// windows returns the distinct rule windows, shortest first.
func (r *Rules) windows() []int64 {
	var ws []int64
	for _, x := range r.rules {
		ws = append(ws, x.windowMs)
	}
	slices.Sort(ws)
	return slices.Compact(ws)
}

// MaxWindow is the longest rule window (0 without rules).
func (r *Rules) MaxWindow() time.Duration { return r.maxWindow() }

// maxWindow is the longest rule window (0 without rules).
func (r *Rules) maxWindow() time.Duration {
	var m int64
	for _, x := range r.rules {
		m = max(m, x.windowMs)
	}
	return time.Duration(m) * time.Millisecond
}

// counts reports whether an event of class c counts toward the rule.
func (x *rule) counts(c opClass) bool { return x.counted&(1<<c) != 0 }

// countedClasses is the counted mask of a rule's ops.
func countedClasses(ops string) uint8 {
	switch ops {
	case OpsReads:
		return 1 << opRead
	case OpsWrites:
		return 1 << opWrite
	}
	return 1<<opOther | 1<<opRead | 1<<opWrite
}
