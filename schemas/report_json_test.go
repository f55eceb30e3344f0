package schemas

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileStrings are strings whose JSON escaping differs between careless
// encoders: quotes, backslashes, control bytes, HTML characters, the
// JavaScript line separators, invalid and truncated UTF-8, and long ones.
var hostileStrings = []string{
	"", "k", "user:42", `a"b`, `back\slash`, "\x00\x01\x1f\x7f", "\b\f\n\r\t",
	"<script>&amp;</script>", "\u2028\u2029", "a\u2028b\u2029c", "héllo wörld", "日本語",
	"\xff", "a\xfeb", "\xe2\x80", "\xe2\x80\xa8", "\xed\xa0\x80", "\xf4\x90\x80\x80", "emoji 😀", "\U0010FFFF",
	"\ufffd", "\xc0\xaf", strings.Repeat("x", 5000), strings.Repeat("\xff<\"\u2028", 300),
}

// randomFill sets every field reachable from v to a random value: strings
// from hostileStrings or random bytes, numbers small, large, negative
// and extreme, floats zero, negative zero, tiny, huge and ordinary,
// slices nil, empty or filled. A field added to the report's types is
// then filled too, and the comparison with encoding/json sees it.
func randomFill(rng *rand.Rand, v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.String:
		if rng.IntN(4) == 0 {
			b := make([]byte, rng.IntN(12))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			v.SetString(string(b))
		} else {
			v.SetString(hostileStrings[rng.IntN(len(hostileStrings))])
		}
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := v.Type().Bits()
		choices := []int64{0, 1, -1, int64(rng.IntN(1000)), -int64(rng.IntN(1000)),
			math.MinInt64 >> (64 - bits), math.MaxInt64 >> (64 - bits)}
		v.SetInt(choices[rng.IntN(len(choices))])
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := v.Type().Bits()
		choices := []uint64{0, 1, uint64(rng.IntN(1000)), rng.Uint64() >> (64 - bits), math.MaxUint64 >> (64 - bits)}
		v.SetUint(choices[rng.IntN(len(choices))])
	case reflect.Float32, reflect.Float64:
		choices := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 1.0 / 3, rng.Float64(), -rng.Float64() * 1e6,
			1e-6, 9.99e-7, 1e-7, 1.5e-300, 1e20, 1e21, 123456789e15, math.MaxFloat64, math.SmallestNonzeroFloat64,
			-5e-324, 100, 1e6 + 0.25}
		v.SetFloat(choices[rng.IntN(len(choices))])
	case reflect.Slice:
		switch rng.IntN(4) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			n := 1 + rng.IntN(3)
			if depth > 3 {
				n = 1
			}
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := range n {
				randomFill(rng, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				randomFill(rng, v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		if rng.IntN(2) == 0 {
			v.SetZero()
		} else {
			p := reflect.New(v.Type().Elem())
			randomFill(rng, p.Elem(), depth+1)
			v.Set(p)
		}
	default:
		panic("randomFill: unhandled kind " + v.Kind().String() + " in " + v.Type().String())
	}
}

// requireSameJSON checks that AppendJSON writes exactly what
// encoding/json writes for r, and fails the same way.
func requireSameJSON(t testing.TB, r *WindowReport) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, err := r.AppendJSON([]byte("prefix"))
	if wantErr != nil {
		require.Error(t, err, "encoding/json fails (%v), AppendJSON does not", wantErr)
		require.ErrorContains(t, err, wantErr.Error())
		return
	}
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(got), "prefix"), "AppendJSON dropped what dst held")
	require.Equal(t, string(want), string(got[len("prefix"):]))
}

func TestReportJSONMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// randomFill draws no NaN or infinity, so every report here compares
	// by its bytes; TestReportJSONNonFinite covers the error.
	for range 3000 {
		var r WindowReport
		randomFill(rng, reflect.ValueOf(&r).Elem(), 0)
		requireSameJSON(t, &r)
	}
}

func TestReportJSONHostileKeys(t *testing.T) {
	for _, s := range hostileStrings {
		r := &WindowReport{Version: ReportVersion, ID: s, Scope: ScopeApp, App: s, Topics: []string{s},
			Missing: []string{s}, Top: []KeyCount{{App: s, Key: s, Count: 3, Share: 0.5}},
			TopBytes: []KeyCount{{App: s, Key: s, Bytes: 1, Error: 2, Shortened: true}},
			Skew:     Skew{Partitions: []PartitionLoad{{Topic: s}}, Nodes: []NodeLoad{{Node: s}}},
			Advice:   []KeyAdvice{{App: s, Key: s, Mitigation: Mitigation{Kind: s, Split: 2}}}}
		requireSameJSON(t, r)
	}
	// Zero values: nil slices are null or left out, as encoding/json does.
	requireSameJSON(t, &WindowReport{})
	requireSameJSON(t, &WindowReport{Topics: []string{}, Top: []KeyCount{}, Missing: []string{}, TopBytes: []KeyCount{},
		Skew: Skew{Partitions: []PartitionLoad{}, Nodes: []NodeLoad{{Ranges: []SlotRange{}}}, HotSlots: []SlotCount{}}, Advice: []KeyAdvice{}})
}

func TestReportJSONNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r := &WindowReport{Skew: Skew{Gini: f}}
		_, err := r.AppendJSON(nil)
		require.Error(t, err, "%v", f)
		requireSameJSON(t, r)
		r = &WindowReport{Top: []KeyCount{{Share: f}}}
		requireSameJSON(t, r)
	}
}

func FuzzReportJSON(f *testing.F) {
	for _, s := range hostileStrings[:20] {
		f.Add(s, s, uint64(7), 0.25, int32(-1))
	}
	f.Fuzz(func(t *testing.T, app, key string, count uint64, share float64, part int32) {
		r := &WindowReport{Version: ReportVersion, ID: key, Scope: ScopeApp, App: app, Topics: []string{app, key},
			Events: count, Top: []KeyCount{{App: app, Key: key, Count: count, Error: count / 2, Partition: part, Share: share}},
			Skew:   Skew{Partitions: []PartitionLoad{{Topic: key, Partition: part, Share: share}}, Gini: share},
			Advice: []KeyAdvice{{App: app, Key: key, Rate: share, Mitigation: Mitigation{Kind: key}}}}
		requireSameJSON(t, r)
	})
}

// TestReportJSONRepeatedFloats covers the copy of the last float's text:
// runs of one value, values alike but for their sign or their form (%e),
// and a value repeated after others.
func TestReportJSONRepeatedFloats(t *testing.T) {
	vals := []float64{0.001, 0.001, 0.001, 1e-7, 1e-7, 0.5, math.Copysign(0, -1), 0, 0, 0.001, 1e22, 1e22, -0.25, -0.25}
	r := &WindowReport{Top: make([]KeyCount, len(vals)), Skew: Skew{Gini: 0.001, Partitions: make([]PartitionLoad, len(vals))}}
	for i, v := range vals {
		r.Top[i] = KeyCount{App: "a", Key: "k" + string(rune('a'+i)), Count: 1, Share: v}
		r.Skew.Partitions[i] = PartitionLoad{Topic: "t", Share: v}
	}
	requireSameJSON(t, r)
}

// TestReportJSONRepeatedFloatsRandom writes reports whose every float is
// drawn from a few values at the edges of encoding/json's forms (%e
// below 1e-6 and from 1e21, subnormals, signed zeros, NaN and
// infinities), so the text of one is copied where the last was alike and
// formatted where it was not.
func TestReportJSONRepeatedFloatsRandom(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1e-6, math.Nextafter(1e-6, 0), 1e-7, 1e21, math.Nextafter(1e21, 0), 1e22,
		5e-324, -5e-324, math.MaxFloat64, 0.1, 1.0 / 3, -2.5e-9, 123456789.125}
	r := rand.New(rand.NewPCG(9, 10))
	pick := func() float64 {
		switch r.IntN(40) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(-1)
		}
		return vals[r.IntN(len(vals))]
	}
	for range 2000 {
		n := 1 + r.IntN(6)
		rep := &WindowReport{Version: ReportVersion, ID: "cluster/0", Scope: ScopeCluster, Top: make([]KeyCount, n),
			Skew: Skew{MaxMean: pick(), Gini: pick(), Top1Share: pick(), Top10Share: pick(), NodeMaxMean: pick(), NodeGini: pick()}}
		for i := range rep.Top {
			rep.Top[i] = KeyCount{App: "a", Key: "k" + strconv.Itoa(i), Count: 1, Share: pick()}
			rep.Skew.Partitions = append(rep.Skew.Partitions, PartitionLoad{Topic: "t", Share: pick()})
			rep.Skew.Nodes = append(rep.Skew.Nodes, NodeLoad{Node: "n", Share: pick()})
			rep.Advice = append(rep.Advice, KeyAdvice{App: "a", Key: "k", Rate: pick(), Threshold: pick(), ReadShare: pick()})
		}
		if r.IntN(2) == 0 {
			rep.TopBytes = slices.Clone(rep.Top)
		}
		requireSameJSON(t, rep)
	}
}
