package pipeline

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/keyheat/keyheat/schemas"
)

// Options configures what a Partition computes. config composes it under
// one key of the configuration file; DefaultOptions holds every default,
// and the zero value of a field is never silently replaced by one.
//
// Everything here is fixed for a Partition's life except the RuleSet
// (rules, whitelist, read and write operations), which SetRules replaces.
type Options struct {
	// Window is the length of the report windows: tumbling, aligned to
	// multiples of it since the Unix epoch, whole milliseconds.
	Window time.Duration `mapstructure:"window"`
	// Lateness is how far behind the newest event time the watermark
	// trails. A window closes when the watermark passes its end; an event
	// whose window has closed is late.
	Lateness time.Duration `mapstructure:"lateness"`
	// IdleTimeout is how long (wall clock) a live partition may see no
	// event before Idle advances its clock to the wall clock, so its
	// windows still close.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// MaxApps bounds the apps a window tracks separately; the events of
	// apps beyond it are summed under schemas.OtherApp.
	MaxApps int `mapstructure:"max_apps"`
	// MaxKeyBytes is the longest key tracked and reported as is. A longer
	// key is tracked as a prefix, "…" and 16 hex digits of the whole key's
	// hash, MaxKeyBytes bytes in all, so distinct long keys stay distinct;
	// summaries, reports and hot-key events mark it Shortened. The default
	// is schemas.DefaultMaxKeyBytes, the longest key ingest accepts by
	// default (events.max_key_bytes): raise both together.
	MaxKeyBytes int `mapstructure:"max_key_bytes"`

	// Summary sizes each app's part of a window summary.
	Summary SummaryOptions `mapstructure:"summary"`
	// Detect sizes and tunes hot-key detection.
	Detect DetectOptions `mapstructure:"detect"`

	// RuleSet: rules, whitelist, read and write operations.
	RuleSet `mapstructure:",squash"`
}

// SummaryOptions sizes the figures of a PartitionWindow. Each open window
// counts its keys, every app together, in an exact table of at most
// ExactKeys keys and ExactKeyBytes of key bytes (64 bytes a key, 8 for
// its index and one for a Bloom filter, plus the keys); keys that come after it filled are
// counted per app by a bounded top-K of TopCapacity keys (about
// TopCapacity × (82 + key length) + 4 × TopWidth × 8 bytes) and a big-key
// tracker sized alike, which an app gets only once its keys overflow the
// table. Every app also has 2^DistinctPrecision bytes of distinct-key
// sketch and 64 KiB of slot counters, plus 4 × SketchWidth × 8 when the
// topic is not keyed. Options.MemoryBound adds it all up.
type SummaryOptions struct {
	// ExactKeys is how many distinct keys (all apps together) a partition
	// counts exactly in a window, with every figure; 0 turns exact
	// counting off. Past it (or past ExactKeyBytes) a window's new keys
	// are counted by the bounded top-K and its summary says it is
	// approximate.
	ExactKeys int `mapstructure:"exact_keys"`
	// ExactKeyBytes bounds the bytes of the keys the exact table holds in
	// a window: with the default, 65,536 keys of 64 bytes on average.
	ExactKeyBytes int `mapstructure:"exact_key_bytes"`
	// TopKeys is how many heaviest keys per app a window reports.
	TopKeys int `mapstructure:"top_keys"`
	// TopCapacity is how many keys per app a window tracks to find them
	// (a few times TopKeys makes the reported boundary exact in practice).
	TopCapacity int `mapstructure:"top_capacity"`
	// TopWidth is the width of the 4-row Count-Min admission filter of the
	// top keys.
	TopWidth int `mapstructure:"top_width"`
	// BigKeys is how many keys per app a window reports by bytes, and by
	// reads, by writes and by latency; 0 turns these lists off.
	BigKeys int `mapstructure:"big_keys"`
	// BigCapacity and BigWidth size the big-key tracker as TopCapacity and
	// TopWidth size the top-key one.
	BigCapacity int `mapstructure:"big_capacity"`
	BigWidth    int `mapstructure:"big_width"`
	// DistinctPrecision is the HyperLogLog precision p of the distinct-key
	// estimate (2^p bytes, standard error 1.04/√2^p).
	DistinctPrecision int `mapstructure:"distinct_precision"`
	// SketchWidth is the width of the 4-row Count-Min sketch a window
	// carries per app when the topic is not keyed by access key.
	SketchWidth int `mapstructure:"sketch_width"`
}

// DetectOptions sizes and tunes hot-key detection. Per distinct rule
// window the detector keeps Slots+1 Count-Min sketches of one slot each
// and a HotRing of at most 2 × RingNodes keys (see Options.MemoryBound).
type DetectOptions struct {
	// Slots is how many slots a rule window is counted in; each rule
	// window must be a whole number of milliseconds per slot. Decisions
	// count the slots after the oldest, so an alert comes no earlier than
	// the true crossing and, for a key that stays Slots/(Slots−1) of its
	// threshold or more, at most one slot after it.
	Slots int `mapstructure:"slots"`
	// Gate is the fraction of a rule's rate a key must reach within one
	// slot (by its Count-Min estimate) to be tracked exactly. Any key that
	// reaches its rate over a window does so in some slot by at least
	// Slots/(Slots+1) of the rate, so a gate below that never misses one.
	Gate float64 `mapstructure:"gate"`
	// SketchDepth and SketchWidth size each slot's Count-Min sketch.
	// Estimates exceed true counts by at most e/SketchWidth × the slot's
	// events with probability 1 − e^-SketchDepth; an admitted key is
	// credited with those estimates, so this is what it can be over-counted
	// by until its admission slot leaves the window.
	SketchDepth int `mapstructure:"sketch_depth"`
	SketchWidth int `mapstructure:"sketch_width"`
	// RingNodes is how many keys per rule window are tracked exactly
	// before admission gets stricter: past it, only keys whose estimate
	// over the window reaches half their rule's threshold are admitted, up
	// to 2 × RingNodes; past that, none (counted in Stats.RingRefused).
	RingNodes int `mapstructure:"ring_nodes"`
	// Suppress is the least event time between a key's "cooled" and its
	// next "hot": a key that turns hot again sooner is published when
	// Suppress has passed, if it is still hot then.
	Suppress time.Duration `mapstructure:"suppress"`
	// CoolDown is how long (event time) a hot key must stay below its
	// threshold to be published as cooled.
	CoolDown time.Duration `mapstructure:"cool_down"`
	// SplitCapacity is the write rate (events/s) one physical key can take;
	// a write-heavy hot key is advised to split into the next power of two
	// of its write rate over it.
	SplitCapacity float64 `mapstructure:"split_capacity"`
	// RefreshChange is how far, as a share of the last rate published
	// for a hot key, its rate over its rule window must move (up or down)
	// for the key to be published again while it stays hot, as Type
	// "update" with the new rate, peak and advice. It is checked at every
	// slot boundary, and a key gets at most one record per rule window.
	// 0 publishes no updates.
	RefreshChange float64 `mapstructure:"refresh_change"`
	// PreThreshold is, on a topic not keyed by access key, the fraction of
	// a rule's rate, divided by the topic's partition count P, at which a
	// partition lists a key to the cluster stage (its local
	// pre-threshold τ = rate × PreThreshold / P): a key at its rule's rate
	// spread evenly over the partitions is listed by every partition.
	// Lower lists more keys, for tighter cluster bounds. In (0, 1].
	PreThreshold float64 `mapstructure:"pre_threshold"`
	// MaxCandidates bounds the keys a partition lists in one candidate
	// batch; past it the heaviest are listed and the batch's floor is
	// raised to the largest count left out.
	MaxCandidates int `mapstructure:"max_candidates"`
	// ClusterKeys bounds the (rule, app, key) entries the cluster stage
	// keeps; a key listed while it is full is not tracked (counted in
	// ClusterStats.KeysRefused) until entries expire.
	ClusterKeys int `mapstructure:"cluster_keys"`
}

// RuleSet is the part of Options that SetRules can replace while the
// partition runs.
type RuleSet struct {
	// Rules say which keys to watch and how hot is hot. A key is watched
	// by the first rule, in order, whose App and Key patterns match it.
	Rules []Rule `mapstructure:"rules"`
	// Whitelist names keys that are never reported: never alerted, never
	// listed in a window's top or big keys. They still count in totals,
	// slots and distinct keys.
	Whitelist []KeyMatch `mapstructure:"whitelist"`
	// ReadOps and WriteOps classify an event's Op (case-insensitively) as
	// a read or a write; other operations count as neither.
	ReadOps  []string `mapstructure:"read_ops"`
	WriteOps []string `mapstructure:"write_ops"`
}

// Ops values of a Rule.
const (
	OpsAll    = "all"
	OpsReads  = "reads"
	OpsWrites = "writes"
)

// Rule watches the keys its patterns match for a rate over a sliding
// window. Patterns are an exact string, a prefix ("user:*") or a glob with
// * (any run of bytes) and ? (one byte); \ makes the next byte literal.
type Rule struct {
	// Name identifies the rule in alerts; unique in a RuleSet.
	Name string `mapstructure:"name"`
	// Key is the pattern of the keys the rule watches.
	Key string `mapstructure:"key"`
	// App is the pattern of the apps whose keys it watches; empty means
	// every app.
	App string `mapstructure:"app"`
	// Window is the sliding window the rates are measured over, a whole
	// number of milliseconds per detection slot (DetectOptions.Slots).
	Window time.Duration `mapstructure:"window"`
	// Rate is the threshold in events per second; 0 means none.
	Rate float64 `mapstructure:"rate"`
	// BytesRate is a threshold in bytes per second; 0 means none. A key is
	// hot when it reaches either threshold the rule sets.
	BytesRate float64 `mapstructure:"bytes_rate"`
	// Ops is which events count toward the rates: all (or empty), reads or
	// writes.
	Ops string `mapstructure:"ops"`
	// Alert publishes the rule's hot keys; false only watches them (the
	// merger's advice still uses the rule's threshold). Unset means true.
	Alert *bool `mapstructure:"alert"`
	// ClusterBound is what a cluster alert (a topic not keyed by access
	// key) compares with the rate: "upper" (or empty), the sum of the
	// counts the partitions listed plus the floors of the partitions that
	// did not list the key, so that no key whose cluster count reaches the
	// rate is missed (a key can be alerted at 1 − pre_threshold of the
	// rate at worst, when the partitions not listing it had none); or
	// "lower", the listed counts alone, which never alerts a key whose
	// listed counts do not reach the rate and can miss one whose events
	// are thinly spread over partitions that did not list it.
	ClusterBound string `mapstructure:"cluster_bound"`
}

// ClusterBound values of a Rule.
const (
	BoundLower = "lower"
	BoundUpper = "upper"
)

// alerts reports whether the rule publishes its hot keys.
func (r Rule) alerts() bool { return r.Alert == nil || *r.Alert }

// KeyMatch names keys by pattern (as Rule.Key) and, optionally, app
// pattern (as Rule.App; empty means every app).
type KeyMatch struct {
	App string `mapstructure:"app"`
	Key string `mapstructure:"key"`
}

// DefaultReadOps and DefaultWriteOps are the default operation lists: the
// Redis commands that read or write one key's value, and the HTTP methods.
var (
	DefaultReadOps = []string{
		"GET", "MGET", "GETRANGE", "STRLEN", "EXISTS", "TTL", "PTTL", "TYPE", "GETBIT", "BITCOUNT",
		"HGET", "HMGET", "HGETALL", "HKEYS", "HVALS", "HEXISTS", "HLEN", "HSTRLEN", "HSCAN",
		"LRANGE", "LINDEX", "LLEN", "SMEMBERS", "SISMEMBER", "SMISMEMBER", "SCARD", "SRANDMEMBER", "SSCAN",
		"ZRANGE", "ZRANGEBYSCORE", "ZREVRANGE", "ZREVRANGEBYSCORE", "ZSCORE", "ZMSCORE", "ZRANK", "ZREVRANK", "ZCARD", "ZCOUNT", "ZSCAN",
		"XRANGE", "XREVRANGE", "XREAD", "XLEN", "PFCOUNT",
		"HEAD", "OPTIONS",
	}
	DefaultWriteOps = []string{
		"SET", "SETEX", "PSETEX", "SETNX", "MSET", "GETSET", "GETDEL", "GETEX", "APPEND", "SETRANGE", "SETBIT",
		"DEL", "UNLINK", "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST",
		"INCR", "INCRBY", "INCRBYFLOAT", "DECR", "DECRBY",
		"HSET", "HMSET", "HSETNX", "HDEL", "HINCRBY", "HINCRBYFLOAT",
		"LPUSH", "RPUSH", "LPOP", "RPOP", "LSET", "LREM", "LTRIM", "LINSERT",
		"SADD", "SREM", "SPOP", "SMOVE", "ZADD", "ZREM", "ZINCRBY", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZPOPMIN", "ZPOPMAX",
		"XADD", "XDEL", "XTRIM", "PFADD",
		"POST", "PUT", "PATCH", "DELETE",
	}
)

// DefaultOptions returns the configuration every unset key falls back to:
// 1 s report windows, 2 s lateness, one rule watching every key for 1000
// events/s over 1 s, and the sizes documented on each field.
func DefaultOptions() Options {
	return Options{
		Window:      time.Second,
		Lateness:    2 * time.Second,
		IdleTimeout: 5 * time.Second,
		MaxApps:     16,
		MaxKeyBytes: schemas.DefaultMaxKeyBytes,
		Summary: SummaryOptions{
			ExactKeys:         65_536,
			ExactKeyBytes:     4 << 20,
			TopKeys:           100,
			TopCapacity:       1024,
			TopWidth:          2048,
			BigKeys:           10,
			BigCapacity:       128,
			BigWidth:          512,
			DistinctPrecision: 14,
			SketchWidth:       2048,
		},
		Detect: DetectOptions{
			Slots:         10,
			Gate:          0.5,
			SketchDepth:   4,
			SketchWidth:   4096,
			RingNodes:     4096,
			Suppress:      5 * time.Second,
			CoolDown:      10 * time.Second,
			SplitCapacity: 10_000,
			RefreshChange: 0.25,
			PreThreshold:  0.1,
			MaxCandidates: 1024,
			ClusterKeys:   1 << 16,
		},
		RuleSet: RuleSet{
			Rules:    []Rule{{Name: "default", Key: "*", Window: time.Second, Rate: 1000, Ops: OpsAll}},
			ReadOps:  append([]string(nil), DefaultReadOps...),
			WriteOps: append([]string(nil), DefaultWriteOps...),
		},
	}
}

// ErrInvalidOptions is wrapped by every error Validate returns.
var ErrInvalidOptions = errors.New("pipeline: invalid options")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
}

// Limits Validate enforces.
const (
	// MaxSlots bounds DetectOptions.Slots (the ring keeps Slots+1 slots of
	// five lanes per key).
	MaxSlots = 64
	// MaxRuleWindow bounds a rule's window: longer windows cost nothing
	// more in memory, but a restart re-reads three of them to warm up.
	MaxRuleWindow = time.Hour
	// MaxApps bounds Options.MaxApps (a window's exact table names an app
	// in 16 bits).
	MaxApps = 1<<16 - 2
	// MaxExactKeys and MaxExactKeyBytes bound SummaryOptions.ExactKeys and
	// ExactKeyBytes (the table's index holds an entry number in 24 bits
	// beside part of the key's hash; key offsets are 32 bits).
	MaxExactKeys     = 1<<24 - 1
	MaxExactKeyBytes = 1 << 30
)

// Validate reports the first problem with o, or nil. Errors wrap
// ErrInvalidOptions and name the key to fix.
func (o Options) Validate() error {
	if err := wholeMs("window", o.Window, false); err != nil {
		return err
	}
	if err := wholeMs("lateness", o.Lateness, true); err != nil {
		return err
	}
	if err := wholeMs("idle_timeout", o.IdleTimeout, false); err != nil {
		return err
	}
	switch {
	case o.MaxApps < 1 || o.MaxApps > MaxApps:
		return invalid("max_apps = %d, want 1 to %d", o.MaxApps, MaxApps)
	case o.MaxKeyBytes < minKeyBytes:
		return invalid("max_key_bytes = %d, want at least %d (room for a prefix, … and a 16-digit hash)", o.MaxKeyBytes, minKeyBytes)
	}
	if err := o.Summary.validate(); err != nil {
		return err
	}
	if err := o.Detect.validate(); err != nil {
		return err
	}
	return o.RuleSet.validate(o.Detect)
}

func (s SummaryOptions) validate() error {
	switch {
	case s.ExactKeys < 0 || s.ExactKeys > MaxExactKeys:
		return invalid("summary.exact_keys = %d, want 0 (off) to %d", s.ExactKeys, MaxExactKeys)
	case s.ExactKeys > 0 && (s.ExactKeyBytes < 1 || s.ExactKeyBytes > MaxExactKeyBytes):
		return invalid("summary.exact_key_bytes = %d, want 1 to %d", s.ExactKeyBytes, MaxExactKeyBytes)
	case s.TopKeys < 1:
		return invalid("summary.top_keys = %d, want at least 1", s.TopKeys)
	case s.TopCapacity < s.TopKeys || s.TopCapacity > 1<<20:
		return invalid("summary.top_capacity = %d, want top_keys (%d) to %d", s.TopCapacity, s.TopKeys, 1<<20)
	case s.TopWidth < 1 || s.TopWidth > 1<<24:
		return invalid("summary.top_width = %d, want 1 to %d", s.TopWidth, 1<<24)
	case s.BigKeys < 0:
		return invalid("summary.big_keys = %d, want 0 (off) or more", s.BigKeys)
	case s.BigKeys > 0 && (s.BigCapacity < s.BigKeys || s.BigCapacity > 1<<20):
		return invalid("summary.big_capacity = %d, want big_keys (%d) to %d", s.BigCapacity, s.BigKeys, 1<<20)
	case s.BigKeys > 0 && (s.BigWidth < 1 || s.BigWidth > 1<<24):
		return invalid("summary.big_width = %d, want 1 to %d", s.BigWidth, 1<<24)
	case s.DistinctPrecision < 4 || s.DistinctPrecision > 18:
		return invalid("summary.distinct_precision = %d, want 4 to 18", s.DistinctPrecision)
	case s.SketchWidth < 1 || s.SketchWidth > 1<<24:
		return invalid("summary.sketch_width = %d, want 1 to %d", s.SketchWidth, 1<<24)
	}
	return nil
}

func (d DetectOptions) validate() error {
	switch {
	case d.Slots < 1 || d.Slots > MaxSlots:
		return invalid("detect.slots = %d, want 1 to %d", d.Slots, MaxSlots)
	case !(d.Gate > 0) || d.Gate > float64(d.Slots)/float64(d.Slots+1):
		// Above Slots/(Slots+1) a key spread evenly over the window at
		// exactly its rate never passes the gate.
		return invalid("detect.gate = %v, want above 0 and at most slots/(slots+1) = %.3f", d.Gate, float64(d.Slots)/float64(d.Slots+1))
	case d.SketchDepth < 1 || d.SketchDepth > 16:
		return invalid("detect.sketch_depth = %d, want 1 to 16", d.SketchDepth)
	case d.SketchWidth < 1 || d.SketchWidth > 1<<24:
		return invalid("detect.sketch_width = %d, want 1 to %d", d.SketchWidth, 1<<24)
	case d.RingNodes < 1 || d.RingNodes > 1<<24:
		return invalid("detect.ring_nodes = %d, want 1 to %d", d.RingNodes, 1<<24)
	case !(d.SplitCapacity > 0) || math.IsInf(d.SplitCapacity, 0):
		return invalid("detect.split_capacity = %v, want a positive rate", d.SplitCapacity)
	case !(d.RefreshChange >= 0) || math.IsInf(d.RefreshChange, 0):
		return invalid("detect.refresh_change = %v, want 0 (no updates) or a positive share such as 0.25", d.RefreshChange)
	case !(d.PreThreshold > 0) || d.PreThreshold > 1:
		return invalid("detect.pre_threshold = %v, want above 0 and at most 1", d.PreThreshold)
	case d.MaxCandidates < 1 || d.MaxCandidates > 1<<20:
		return invalid("detect.max_candidates = %d, want 1 to %d", d.MaxCandidates, 1<<20)
	case d.ClusterKeys < 1 || d.ClusterKeys > 1<<24:
		return invalid("detect.cluster_keys = %d, want 1 to %d", d.ClusterKeys, 1<<24)
	}
	if err := wholeMs("detect.suppress", d.Suppress, true); err != nil {
		return err
	}
	return wholeMs("detect.cool_down", d.CoolDown, true)
}

func (s RuleSet) validate(d DetectOptions) error {
	names := map[string]bool{}
	for i, r := range s.Rules {
		where := fmt.Sprintf("rules[%d]", i)
		if r.Name != "" {
			where = fmt.Sprintf("rules[%d] (%s)", i, r.Name)
		}
		switch {
		case r.Name == "":
			return invalid("%s: name is empty; every rule needs a unique name", where)
		case names[r.Name]:
			return invalid("%s: name used twice", where)
		case r.Key == "":
			return invalid("%s: key pattern is empty; use * for every key", where)
		case !isRate(r.Rate) || !isRate(r.BytesRate):
			return invalid("%s: rate %v and bytes_rate %v must be finite and not negative", where, r.Rate, r.BytesRate)
		case r.Rate == 0 && r.BytesRate == 0:
			return invalid("%s: set rate (events/s), bytes_rate (bytes/s) or both", where)
		case r.Ops != "" && r.Ops != OpsAll && r.Ops != OpsReads && r.Ops != OpsWrites:
			return invalid("%s: ops %q, want all, reads or writes", where, r.Ops)
		case r.ClusterBound != "" && r.ClusterBound != BoundLower && r.ClusterBound != BoundUpper:
			return invalid("%s: cluster_bound %q, want lower or upper", where, r.ClusterBound)
		}
		names[r.Name] = true
		if _, err := compilePattern(r.Key); err != nil {
			return invalid("%s: key: %v", where, err)
		}
		if _, err := compilePattern(r.App); err != nil {
			return invalid("%s: app: %v", where, err)
		}
		if err := wholeMs(where+": window", r.Window, false); err != nil {
			return err
		}
		ms := r.Window.Milliseconds()
		switch {
		case r.Window > MaxRuleWindow:
			return invalid("%s: window %v is over %v", where, r.Window, MaxRuleWindow)
		case ms%int64(d.Slots) != 0:
			return invalid("%s: window %v is not a whole number of milliseconds per slot (detect.slots = %d); use a multiple of %dms", where, r.Window, d.Slots, d.Slots)
		case r.Rate > 0 && r.Rate*float64(ms)/1000 < 1:
			return invalid("%s: rate %v/s over %v is less than one event per window", where, r.Rate, r.Window)
		case r.Rate*float64(ms) > 1<<52 || r.BytesRate*float64(ms) > 1<<52:
			return invalid("%s: threshold over the window is too large to count exactly", where)
		}
	}
	for i, w := range s.Whitelist {
		if w.Key == "" {
			return invalid("whitelist[%d]: key pattern is empty", i)
		}
		if _, err := compilePattern(w.Key); err != nil {
			return invalid("whitelist[%d]: key: %v", i, err)
		}
		if _, err := compilePattern(w.App); err != nil {
			return invalid("whitelist[%d]: app: %v", i, err)
		}
	}
	class := map[string]string{}
	for _, l := range []struct {
		name string
		ops  []string
	}{{"read_ops", s.ReadOps}, {"write_ops", s.WriteOps}} {
		for _, op := range l.ops {
			u := upperASCII(op)
			switch {
			case op == "":
				return invalid("%s: an operation is empty", l.name)
			case len(op) > maxOpLen:
				return invalid("%s: operation %q is longer than %d bytes", l.name, op, maxOpLen)
			case class[u] != "" && class[u] != l.name:
				return invalid("operation %q is in both read_ops and write_ops", op)
			}
			class[u] = l.name
		}
	}
	return nil
}

func isRate(r float64) bool { return r >= 0 && !math.IsInf(r, 0) && !math.IsNaN(r) }

// wholeMs checks a duration option: whole milliseconds, positive (or zero
// when zeroOK).
func wholeMs(name string, d time.Duration, zeroOK bool) error {
	if d < 0 || d%time.Millisecond != 0 || (d == 0 && !zeroOK) {
		want := "a positive whole number of milliseconds"
		if zeroOK {
			want = "0 or a whole number of milliseconds"
		}
		return invalid("%s = %v, want %s", name, d, want)
	}
	return nil
}
