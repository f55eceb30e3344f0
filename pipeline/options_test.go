package pipeline

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDefaultOptionsValid(t *testing.T) {
	o := DefaultOptions()
	require.NoError(t, o.Validate())
	r, err := NewRules(o)
	require.NoError(t, err)
	rate, ok := r.Threshold("any", "key")
	require.True(t, ok)
	require.Equal(t, 1000.0, rate)
	require.Equal(t, o.RuleSet, r.Set())
}

func TestValidateRejects(t *testing.T) {
	rule := func(mod func(*Rule)) func(*Options) {
		return func(o *Options) { mod(&o.Rules[0]) }
	}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"zero window", func(o *Options) { o.Window = 0 }, "window = 0s"},
		{"fractional window", func(o *Options) { o.Window = time.Second + time.Microsecond }, "window = 1.000001s"},
		{"negative lateness", func(o *Options) { o.Lateness = -time.Second }, "lateness"},
		{"fractional lateness", func(o *Options) { o.Lateness = time.Microsecond }, "lateness"},
		{"zero idle timeout", func(o *Options) { o.IdleTimeout = 0 }, "idle_timeout"},
		{"no apps", func(o *Options) { o.MaxApps = 0 }, "max_apps"},
		{"too many apps", func(o *Options) { o.MaxApps = MaxApps + 1 }, "max_apps"},
		{"negative exact keys", func(o *Options) { o.Summary.ExactKeys = -1 }, "summary.exact_keys"},
		{"too many exact keys", func(o *Options) { o.Summary.ExactKeys = MaxExactKeys + 1 }, "summary.exact_keys"},
		{"no exact key bytes", func(o *Options) { o.Summary.ExactKeyBytes = 0 }, "summary.exact_key_bytes"},
		{"too many exact key bytes", func(o *Options) { o.Summary.ExactKeyBytes = MaxExactKeyBytes + 1 }, "summary.exact_key_bytes"},
		{"keys too short", func(o *Options) { o.MaxKeyBytes = minKeyBytes - 1 }, "max_key_bytes"},
		{"no top keys", func(o *Options) { o.Summary.TopKeys = 0 }, "summary.top_keys"},
		{"capacity below top keys", func(o *Options) { o.Summary.TopCapacity = 99 }, "summary.top_capacity"},
		{"capacity too large", func(o *Options) { o.Summary.TopCapacity = 1<<20 + 1 }, "summary.top_capacity"},
		{"top width", func(o *Options) { o.Summary.TopWidth = 0 }, "summary.top_width"},
		{"negative big keys", func(o *Options) { o.Summary.BigKeys = -1 }, "summary.big_keys"},
		{"big capacity", func(o *Options) { o.Summary.BigCapacity = 5 }, "summary.big_capacity"},
		{"big width", func(o *Options) { o.Summary.BigWidth = 0 }, "summary.big_width"},
		{"distinct precision low", func(o *Options) { o.Summary.DistinctPrecision = 3 }, "summary.distinct_precision"},
		{"distinct precision high", func(o *Options) { o.Summary.DistinctPrecision = 19 }, "summary.distinct_precision"},
		{"sketch width", func(o *Options) { o.Summary.SketchWidth = -1 }, "summary.sketch_width"},
		{"no slots", func(o *Options) { o.Detect.Slots = 0 }, "detect.slots"},
		{"too many slots", func(o *Options) { o.Detect.Slots = MaxSlots + 1 }, "detect.slots"},
		{"zero gate", func(o *Options) { o.Detect.Gate = 0 }, "detect.gate"},
		{"NaN gate", func(o *Options) { o.Detect.Gate = math.NaN() }, "detect.gate"},
		{"gate that misses even keys", func(o *Options) { o.Detect.Gate = 0.95 }, "slots/(slots+1) = 0.909"},
		{"sketch depth", func(o *Options) { o.Detect.SketchDepth = 0 }, "detect.sketch_depth"},
		{"sketch width", func(o *Options) { o.Detect.SketchWidth = 0 }, "detect.sketch_width"},
		{"ring nodes", func(o *Options) { o.Detect.RingNodes = 0 }, "detect.ring_nodes"},
		{"split capacity", func(o *Options) { o.Detect.SplitCapacity = 0 }, "detect.split_capacity"},
		{"infinite split capacity", func(o *Options) { o.Detect.SplitCapacity = math.Inf(1) }, "detect.split_capacity"},
		{"negative suppress", func(o *Options) { o.Detect.Suppress = -time.Second }, "detect.suppress"},
		{"fractional cool-down", func(o *Options) { o.Detect.CoolDown = time.Nanosecond }, "detect.cool_down"},
		{"rule without name", rule(func(r *Rule) { r.Name = "" }), "name is empty"},
		{"rule names twice", func(o *Options) { o.Rules = append(o.Rules, o.Rules[0]) }, "name used twice"},
		{"rule without key", rule(func(r *Rule) { r.Key = "" }), "key pattern is empty"},
		{"rule key ends in backslash", rule(func(r *Rule) { r.Key = `a\` }), `lone \`},
		{"rule app ends in backslash", rule(func(r *Rule) { r.App = `a\` }), `app: pattern ends`},
		{"negative rate", rule(func(r *Rule) { r.Rate = -1 }), "must be finite and not negative"},
		{"NaN rate", rule(func(r *Rule) { r.Rate = math.NaN() }), "must be finite"},
		{"infinite bytes rate", rule(func(r *Rule) { r.BytesRate = math.Inf(1) }), "must be finite"},
		{"no threshold", rule(func(r *Rule) { r.Rate, r.BytesRate = 0, 0 }), "set rate"},
		{"bad ops", rule(func(r *Rule) { r.Ops = "deletes" }), `ops "deletes"`},
		{"zero rule window", rule(func(r *Rule) { r.Window = 0 }), "window = 0s"},
		{"rule window too long", rule(func(r *Rule) { r.Window = 2 * time.Hour }), "is over 1h0m0s"},
		{"rule window not in slots", rule(func(r *Rule) { r.Window = 1005 * time.Millisecond }), "use a multiple of 10ms"},
		{"less than an event per window", rule(func(r *Rule) { r.Rate = 0.5 }), "less than one event per window"},
		{"threshold too large", rule(func(r *Rule) { r.BytesRate = 1e15 }), "too large"},
		{"whitelist without key", func(o *Options) { o.Whitelist = []KeyMatch{{App: "a"}} }, "whitelist[0]: key pattern is empty"},
		{"whitelist bad key", func(o *Options) { o.Whitelist = []KeyMatch{{Key: `x\`}} }, "whitelist[0]: key"},
		{"whitelist bad app", func(o *Options) { o.Whitelist = []KeyMatch{{Key: "x", App: `y\`}} }, "whitelist[0]: app"},
		{"empty op", func(o *Options) { o.ReadOps = append(o.ReadOps, "") }, "read_ops: an operation is empty"},
		{"long op", func(o *Options) { o.WriteOps = []string{"SOMETHINGLONGERTHANTHIRTYTWOBYTES!"} }, "longer than 32"},
		{"op both read and write", func(o *Options) { o.WriteOps = append(o.WriteOps, "get") }, `"get" is in both`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mod(&o)
			err := o.Validate()
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.ErrorContains(t, err, tc.want)
			_, err = NewRules(o)
			require.ErrorIs(t, err, ErrInvalidOptions)
			_, err = NewPartition(o, testSource, Start{})
			require.ErrorIs(t, err, ErrInvalidOptions)
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"no rules", func(o *Options) { o.Rules = nil }},
		{"no lateness", func(o *Options) { o.Lateness = 0 }},
		{"no big keys", func(o *Options) { o.Summary.BigKeys, o.Summary.BigCapacity, o.Summary.BigWidth = 0, 0, 0 }},
		{"no exact counting", func(o *Options) { o.Summary.ExactKeys, o.Summary.ExactKeyBytes = 0, 0 }},
		{"largest exact table", func(o *Options) { o.Summary.ExactKeys, o.Summary.ExactKeyBytes = MaxExactKeys, MaxExactKeyBytes }},
		{"bytes-only rule", func(o *Options) { o.Rules[0].Rate, o.Rules[0].BytesRate = 0, 1e6 }},
		{"one slot", func(o *Options) { o.Detect.Slots, o.Detect.Gate = 1, 0.5 }},
		{"gate at its bound", func(o *Options) { o.Detect.Gate = 10.0 / 11 }},
		{"no suppression or cool-down", func(o *Options) { o.Detect.Suppress, o.Detect.CoolDown = 0, 0 }},
		{"watch-only reads rule", func(o *Options) { o.Rules[0].Ops, o.Rules[0].Alert = OpsReads, boolp(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mod(&o)
			require.NoError(t, o.Validate())
			_, err := NewPartition(o, testSource, Start{})
			require.NoError(t, err)
		})
	}
}

// The first rule whose app and key patterns match is the key's rule;
// operations are classified case-insensitively.
func TestRulesMatching(t *testing.T) {
	o := DefaultOptions()
	o.Rules = []Rule{
		{Name: "shop-users", App: "shop", Key: "user:*", Window: time.Second, Rate: 10},
		{Name: "sessions", Key: "*:session", Window: 2 * time.Second, Rate: 20, Ops: OpsWrites},
		{Name: "exact", App: "a?p*", Key: "config", Window: time.Second, Rate: 30},
		{Name: "rest", Key: "*", Window: time.Second, Rate: 40},
	}
	o.Whitelist = []KeyMatch{{App: "shop", Key: "user:admin"}}
	r, err := NewRules(o)
	require.NoError(t, err)
	for _, tc := range []struct {
		app, key string
		rate     float64
		ok       bool
	}{
		{"shop", "user:1", 10, true},
		{"cart", "user:1", 40, true},
		{"shop", "user:admin", 0, false},
		{"cart", "user:admin", 40, true},
		{"shop", "u:session", 20, true},
		{"apps", "config", 30, true},
		{"xapp", "config", 40, true},
	} {
		rate, ok := r.Threshold(tc.app, tc.key)
		require.Equal(t, tc.ok, ok, "%s/%s", tc.app, tc.key)
		require.Equal(t, tc.rate, rate, "%s/%s", tc.app, tc.key)
	}
	require.Equal(t, []int64{1000, 2000}, r.windows())
	require.Equal(t, 2*time.Second, r.maxWindow())
	for op, want := range map[string]opClass{"GET": opRead, "get": opRead, "Hgetall": opRead, "SET": opWrite,
		"post": opWrite, "SUBSCRIBE": opOther, "": opOther, "x-very-long-operation-name-over-the-limit": opOther} {
		require.Equal(t, want, r.ops.classify(op), "classify(%q)", op)
	}
	x := r.rules[1]
	require.True(t, x.counts(opWrite))
	require.False(t, x.counts(opRead))
	require.Equal(t, uint64(20*2*200), x.needEvents, "20/s over 2 s, scaled by the 200 ms slot")
	require.Equal(t, uint64(2), x.gateEvents, "half of 20/s over a 200 ms slot")
}
