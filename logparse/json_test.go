package logparse

import (
	"testing"

	"github.com/keyheat/keyheat/schemas"
	"github.com/stretchr/testify/require"
)

// TestJSONDroppedFields: an optional field that does not parse is left at
// zero and reported; the event still goes out.
func TestJSONDroppedFields(t *testing.T) {
	p, err := NewJSON(DefaultJSONConfig(), "app")
	require.NoError(t, err)
	cases := []struct {
		line    string
		want    schemas.AccessEvent
		dropped Fields
	}{
		{`{"key":"k","status":"HIT","bytes":12}`, schemas.AccessEvent{Key: "k", App: "app", Bytes: 12}, FieldStatus},
		{`{"key":"k","bytes":"12k","status":200}`, schemas.AccessEvent{Key: "k", App: "app", Status: 200}, FieldBytes},
		{`{"key":"k","latency_us":true}`, schemas.AccessEvent{Key: "k", App: "app"}, FieldLatencyUs},
		{`{"key":"k","status":-1}`, schemas.AccessEvent{Key: "k", App: "app"}, FieldStatus},
		{`{"key":"k","status":4294967296}`, schemas.AccessEvent{Key: "k", App: "app"}, FieldStatus},
		{`{"key":"k","bytes":1e300}`, schemas.AccessEvent{Key: "k", App: "app"}, FieldBytes},
		{`{"key":"k","op":{"verb":"GET"},"node":[1],"client":"c"}`, schemas.AccessEvent{Key: "k", App: "app", Client: "c"}, FieldOp | FieldNode},
		{`{"key":"k","app":{},"bytes":"x","status":"y","latency_us":"z"}`, schemas.AccessEvent{Key: "k", App: "app"},
			FieldApp | FieldBytes | FieldStatus | FieldLatencyUs},
		// What parses is not dropped.
		{`{"key":"k","bytes":"2048","status":"200","latency_us":240.7}`, schemas.AccessEvent{Key: "k", App: "app", Bytes: 2048, Status: 200, LatencyUs: 240}, 0},
		{`{"key":"k","bytes":"\u0031\u0032","op":5,"node":false}`, schemas.AccessEvent{Key: "k", App: "app", Bytes: 12, Op: "5", Node: "false"}, 0},
		{`{"key":"k","bytes":"","status":null}`, schemas.AccessEvent{Key: "k", App: "app"}, 0},
	}
	for _, tc := range cases {
		e, dropped := parseOne(t, p, tc.line)
		require.Equal(t, tc.want, e, tc.line)
		require.Equal(t, tc.dropped, dropped, "%s: dropped %v", tc.line, dropped)
	}
}

// TestJSONEssentialFields: the key, and a time that is present, still
// reject the line.
func TestJSONEssentialFields(t *testing.T) {
	p, err := NewJSON(DefaultJSONConfig(), "")
	require.NoError(t, err)
	cases := []struct {
		line string
		want schemas.Reason
	}{
		{`{"key":"k","time":"yesterday","status":"HIT"}`, schemas.ReasonParse},
		{`{"key":"k","time":{"s":1}}`, schemas.ReasonParse},
		{`{"key":{"id":1}}`, schemas.ReasonEmptyKey},
		{`{"key":["k"]}`, schemas.ReasonEmptyKey},
		{`{"key":null}`, schemas.ReasonEmptyKey},
		{`{"key":"k\ud800"}`, schemas.ReasonKeyNotUTF8},
		{"{\"key\":\"k\xff\"}", schemas.ReasonKeyNotUTF8},
		{`{"key":"k","x":01}`, schemas.ReasonParse},
		{`{"key":"k","x":"\q"}`, schemas.ReasonParse},
		{`{"key":"k"} {}`, schemas.ReasonParse},
	}
	for _, tc := range cases {
		evs, dropped, err := p.Parse(nil, []byte(tc.line))
		require.Empty(t, evs, tc.line)
		require.Zero(t, dropped)
		require.Equal(t, tc.want, schemas.ReasonOf(err), "%s: %v", tc.line, err)
	}
}

func TestJSONStrings(t *testing.T) {
	p, err := NewJSON(JSONConfig{Key: "req.key", Op: "req.op", Client: "peer", Node: "n"}, "")
	require.NoError(t, err)
	cases := []struct {
		line string
		want schemas.AccessEvent
	}{
		{`{"req":{"key":"a\"b\u00e9\ud83d\ude00","op":"GET"}}`, schemas.AccessEvent{Key: "a\"bé😀", Op: "GET"}},
		{"{\"req\":{\"key\":\"k\"},\"peer\":\"a\xffb\",\"n\":\"\\udc00\"}", schemas.AccessEvent{Key: "k", Client: "a\uFFFDb", Node: "\uFFFD"}},
		{`{"req":{"key":42}}`, schemas.AccessEvent{Key: "42"}},
		{`{"req":{"key":"a"},"req":{"key":"b"}}`, schemas.AccessEvent{Key: "b"}},
		{`{"r\u0065q":{"k\u0065y":"esc"}}`, schemas.AccessEvent{Key: "esc"}},
		{`{"req":"flat","x":{"req":{"key":"no"}},"req":{"key":"yes"}}`, schemas.AccessEvent{Key: "yes"}},
	}
	for _, tc := range cases {
		e, _ := parseOne(t, p, tc.line)
		require.Equal(t, tc.want, e, tc.line)
	}
}

// TestJSONStringsDoNotAliasLine: the caller may reuse the line's buffer.
func TestJSONStringsDoNotAliasLine(t *testing.T) {
	p, err := NewJSON(DefaultJSONConfig(), "")
	require.NoError(t, err)
	line := []byte(`{"key":"user:1","op":"GET","client":"c","node":"n","app":"a"}`)
	e, _ := parseOne(t, p, string(line))
	evs, _, err := p.Parse(nil, line)
	require.NoError(t, err)
	for i := range line {
		line[i] = 'x'
	}
	require.Equal(t, e, evs[0])
}

func TestRegexDroppedFields(t *testing.T) {
	p, err := NewRegex(RegexConfig{Pattern: `^(?P<key>\S+) (?P<bytes>\S+) (?P<status>\S+) (?P<latency_us>\S+)(?: (?P<time>\S+))?$`}, "")
	require.NoError(t, err)
	cases := []struct {
		line    string
		want    schemas.AccessEvent
		dropped Fields
	}{
		{`k 12 200 5`, schemas.AccessEvent{Key: "k", Bytes: 12, Status: 200, LatencyUs: 5}, 0},
		{`k - - -`, schemas.AccessEvent{Key: "k"}, 0},
		{`k 12k HIT 5`, schemas.AccessEvent{Key: "k", LatencyUs: 5}, FieldBytes | FieldStatus},
		{`k 1 99999999999 x`, schemas.AccessEvent{Key: "k", Bytes: 1}, FieldStatus | FieldLatencyUs},
	}
	for _, tc := range cases {
		e, dropped := parseOne(t, p, tc.line)
		require.Equal(t, tc.want, e, tc.line)
		require.Equal(t, tc.dropped, dropped, tc.line)
	}
	_, _, err = p.Parse(nil, []byte(`k 1 2 3 soon`))
	require.Equal(t, schemas.ReasonParse, schemas.ReasonOf(err), "an unparseable time is still essential")
}

func TestFields(t *testing.T) {
	require.Equal(t, "", Fields(0).String())
	require.Equal(t, "bytes", FieldBytes.String())
	f := FieldLatencyUs | FieldOp | FieldStatus
	require.Equal(t, "op,status,latency_us", f.String())
	require.Equal(t, "key,bit15", Fields(1<<fKey|1<<15).String())
	var each []Fields
	for one := range f.All() {
		each = append(each, one)
	}
	require.Equal(t, []Fields{FieldOp, FieldStatus, FieldLatencyUs}, each)
	for one := range f.All() {
		_ = one
		break // stopping early must not panic
	}
}
