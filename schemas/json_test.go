package schemas

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendJSON(t *testing.T) {
	tests := []struct {
		name string
		e    AccessEvent
		want string
	}{
		{"typical", fullEvent,
			`{"ts":1767225600123,"key":"user:42:profile","app":"shop","op":"GET","bytes":512,"status":200,"client":"10.1.2.3","node":"redis-3","lat_us":870}`},
		{"zero omits optional fields", AccessEvent{}, `{"ts":0,"key":""}`},
		{"negatives are not omitted", AccessEvent{TimeMs: -1, Key: "k", Bytes: -2, Status: -3, LatencyUs: -4},
			`{"ts":-1,"key":"k","bytes":-2,"status":-3,"lat_us":-4}`},
		{"escapes", AccessEvent{Key: "q\"b\\s\n\r\t\b\f\x01\x1f/<>&\u2028\u2029é"},
			`{"ts":0,"key":"q\"b\\s\n\r\t\b\f\u0001\u001f/<>&\u2028\u2029é"}`},
		{"invalid UTF-8 becomes U+FFFD", AccessEvent{Key: "a\xffb\xc3"},
			`{"ts":0,"key":"a\ufffdb\ufffd"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendJSON(nil, &tt.e)
			require.Equal(t, tt.want, string(got))
			require.True(t, json.Valid(got))
		})
	}
}

// TestAppendJSONMatchesEncodingJSON checks string escaping against the
// standard library on awkward strings: both must decode to the same value.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"plain", "a\xffb", "\xed\xa0\x80", "\u2028", "\x00\x7f", "tab\there", "😀", "\xf0\x9f\x98"} {
		got := AppendJSON(nil, &AccessEvent{Key: s})
		var v struct{ Key string }
		require.NoError(t, json.Unmarshal(got, &v))
		std, err := json.Marshal(s)
		require.NoError(t, err)
		var want string
		require.NoError(t, json.Unmarshal(std, &want))
		require.Equal(t, want, v.Key, "key %q", s)
	}
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want AccessEvent
	}{
		{"typical", `{"ts":1767225600123,"key":"user:42:profile","app":"shop","op":"GET","bytes":512,"status":200,"client":"10.1.2.3","node":"redis-3","lat_us":870}`,
			fullEvent},
		{"any order and whitespace", " \t\r\n{ \"lat_us\" : 870 ,\n\"node\":\"redis-3\",\"client\":\"10.1.2.3\",\"status\":200,\"bytes\":512,\"op\":\"GET\",\"app\":\"shop\",\"key\":\"user:42:profile\",\"ts\":1767225600123 }\n",
			fullEvent},
		{"empty object", `{}`, AccessEvent{}},
		{"missing key decodes with empty key", `{"ts":5,"app":"a"}`, AccessEvent{TimeMs: 5, App: "a"}},
		{"unknown fields skipped", `{"x":{"a":[1,2,{"b":null}],"c":"}"},"key":"k","y":[[],{}],"z":true,"w":false,"v":null,"u":-1.5e-3,"t":"\"]"}`,
			AccessEvent{Key: "k"}},
		{"last duplicate wins", `{"key":"a","key":"b","ts":1,"ts":2}`, AccessEvent{Key: "b", TimeMs: 2}},
		{"names are case-sensitive", `{"Key":"a","key":"b"}`, AccessEvent{Key: "b"}},
		{"escaped member name", `{"k\u0065y":"a"}`, AccessEvent{Key: "a"}},
		{"null means absent", `{"key":null,"app":null,"ts":null,"bytes":null,"status":null}`, AccessEvent{}},
		{"escapes", `{"key":"a\"\\\/\b\f\n\r\t\u0041\u00e9\u4e2d\ud83d\ude00"}`, AccessEvent{Key: "a\"\\/\b\f\n\r\tAé中😀"}},
		{"raw UTF-8", `{"key":"日本 😀"}`, AccessEvent{Key: "日本 😀"}},
		{"lone surrogate outside key becomes U+FFFD", `{"key":"k","app":"\ud800x","op":"\udc00"}`,
			AccessEvent{Key: "k", App: "\uFFFDx", Op: "\uFFFD"}},
		{"high surrogate then non-surrogate escape", `{"key":"k","app":"\ud800\u0041"}`,
			AccessEvent{Key: "k", App: "\uFFFDA"}},
		{"invalid UTF-8 outside key becomes U+FFFD", "{\"key\":\"k\",\"client\":\"a\xffb\"}",
			AccessEvent{Key: "k", Client: "a\uFFFDb"}},
		{"fraction and exponent truncate", `{"ts":1.7672256001239e12,"bytes":1.5e3,"status":2E2,"lat_us":-0.9}`,
			AccessEvent{TimeMs: 1767225600123, Bytes: 1500, Status: 200}},
		{"tiny exponent", `{"bytes":1e-400}`, AccessEvent{}},
		{"ts as decimal string", `{"ts":"1767225600123"}`, AccessEvent{TimeMs: 1767225600123}},
		{"ts as RFC 3339", `{"ts":"2026-01-01T00:00:00.123Z"}`, AccessEvent{TimeMs: 1767225600123}},
		{"ts as RFC 3339 with offset", `{"ts":"2026-01-01T01:00:00+01:00"}`, AccessEvent{TimeMs: 1767225600000}},
		{"int64 bounds", `{"ts":-9223372036854775808,"bytes":9223372036854775807}`,
			AccessEvent{TimeMs: -9223372036854775808, Bytes: 9223372036854775807}},
		{"negative zero", `{"ts":-0}`, AccessEvent{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AccessEvent{Key: "stale", Op: "stale", LatencyUs: 9}
			require.NoError(t, DecodeJSON([]byte(tt.src), &got))
			require.Equal(t, tt.want, got)
		})
	}
}

func TestDecodeJSONRejects(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		reason Reason
		detail string
		// validJSON marks inputs that are JSON but not an acceptable
		// event (wrong type, out of range, invalid UTF-8 in the key).
		validJSON bool
	}{
		{"empty", ``, ReasonParse, "expected '{'", false},
		{"whitespace only", "  \n", ReasonParse, "expected '{'", false},
		{"array", `[]`, ReasonParse, "expected '{'", true},
		{"string", `"key"`, ReasonParse, "expected '{'", true},
		{"unterminated object", `{"key":"k"`, ReasonParse, "expected ',' or '}'", false},
		{"unterminated string", `{"key":"k}`, ReasonParse, "unterminated string", false},
		{"trailing comma", `{"key":"k",}`, ReasonParse, "expected string for object member name", false},
		{"missing colon", `{"key" "k"}`, ReasonParse, "expected ':'", false},
		{"missing value", `{"key":}`, ReasonParse, "must be a string", false},
		{"trailing data", `{"key":"k"}x`, ReasonParse, "unexpected data after top-level value", false},
		{"two objects", `{"key":"k"} {}`, ReasonParse, "unexpected data", false},
		{"single quotes", `{'key':'k'}`, ReasonParse, "expected string for object member name", false},
		{"unquoted name", `{key:"k"}`, ReasonParse, "expected string", false},
		{"key not a string", `{"key":42}`, ReasonParse, `"key" must be a string`, true},
		{"app not a string", `{"app":{}}`, ReasonParse, `"app" must be a string`, true},
		{"bytes not a number", `{"bytes":"12"}`, ReasonParse, `"bytes" must be a number`, true},
		{"status out of int32", `{"status":2147483648}`, ReasonParse, "out of range", true},
		{"ts out of int64", `{"ts":9223372036854775808}`, ReasonParse, "out of range", true},
		{"float out of int64", `{"ts":1e19}`, ReasonParse, "out of range", true},
		{"float overflow", `{"lat_us":1e400}`, ReasonParse, "out of range", true},
		{"leading zero", `{"bytes":012}`, ReasonParse, "expected ',' or '}'", false},
		{"leading plus", `{"bytes":+1}`, ReasonParse, "must be a number", false},
		{"bare minus", `{"bytes":-}`, ReasonParse, "invalid number", false},
		{"dot without digits", `{"bytes":1.}`, ReasonParse, "digit expected after '.'", false},
		{"exponent without digits", `{"bytes":1e}`, ReasonParse, "digit expected in exponent", false},
		{"hex number", `{"bytes":0x10}`, ReasonParse, "expected ',' or '}'", false},
		{"NaN", `{"x":NaN}`, ReasonParse, "invalid character", false},
		{"bad literal", `{"x":tru}`, ReasonParse, "invalid literal", false},
		{"bad escape", `{"key":"\x"}`, ReasonParse, "invalid escape", false},
		{"short unicode escape", `{"key":"\u12"}`, ReasonParse, `invalid \u escape`, false},
		{"non-hex unicode escape", `{"key":"\u12g4"}`, ReasonParse, `invalid \u escape`, false},
		{"raw newline in string", "{\"key\":\"a\nb\"}", ReasonParse, "control character", false},
		{"bad value in unknown field", `{"x":[1,2,}`, ReasonParse, "invalid character", false},
		{"unclosed array in unknown field", `{"x":[1`, ReasonParse, "expected ',' or ']'", false},
		{"bad nested object", `{"x":{"a" 1}}`, ReasonParse, "expected ':'", false},
		{"too deep", `{"x":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, ReasonParse, "nesting too deep", true},
		{"ts string not a time", `{"ts":"yesterday"}`, ReasonParse, "neither Unix milliseconds nor an RFC 3339", true},
		{"binary record", string(AppendBinary(nil, &fullEvent)), ReasonParse, "expected '{'", false},
		{"invalid UTF-8 in key", "{\"key\":\"a\xffb\"}", ReasonKeyNotUTF8, "not valid UTF-8", true},
		{"lone surrogate in key", `{"key":"a\ud800"}`, ReasonKeyNotUTF8, "not valid UTF-8", true},
		{"reversed surrogates in key", `{"key":"\udc00\ud800"}`, ReasonKeyNotUTF8, "not valid UTF-8", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fullEvent
			err := DecodeJSON([]byte(tt.src), &e)
			requireReason(t, err, tt.reason, &e)
			require.ErrorContains(t, err, tt.detail)
			// Keep the table honest: inputs rejected as syntax errors
			// must be rejected by encoding/json too.
			require.Equal(t, tt.validJSON, json.Valid([]byte(tt.src)), "json.Valid")
		})
	}
}

// TestDecodeJSONEveryTruncationFails: no proper prefix of an object is an
// object, so each must fail, and none may panic.
func TestDecodeJSONEveryTruncationFails(t *testing.T) {
	e := roundTripEvents["escapes"]
	src := AppendJSON(nil, &e)
	for n := range len(src) {
		var e AccessEvent
		require.Error(t, DecodeJSON(src[:n], &e), "prefix %q", src[:n])
	}
}
