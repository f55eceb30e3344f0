package schemas

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewDeadLetter(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		raw    string
		maxRaw int
		want   DeadLetter
	}{
		{"invalid event", &InvalidEventError{Reason: ReasonTimeSkew, Detail: "too old"}, "line", 0,
			DeadLetter{Reason: ReasonTimeSkew, Detail: "too old", Raw: []byte("line"), OrigLen: 4}},
		{"wrapped invalid event", errWrap{&InvalidEventError{Reason: ReasonEmptyKey}}, "x", 0,
			DeadLetter{Reason: ReasonEmptyKey, Raw: []byte("x"), OrigLen: 1}},
		{"other error is a parse error", errors.New("bad gzip"), "\x1f\x8b", 0,
			DeadLetter{Reason: ReasonParse, Detail: "bad gzip", Raw: []byte("\x1f\x8b"), OrigLen: 2}},
		{"empty input", &InvalidEventError{Reason: ReasonParse}, "", 0,
			DeadLetter{Reason: ReasonParse}},
		{"truncated", errors.New("e"), "abcdef", 4,
			DeadLetter{Reason: ReasonParse, Detail: "e", Raw: []byte("abcd"), Truncated: true, OrigLen: 6}},
		{"cut backs off to a rune start", errors.New("e"), "ab€cd", 4, // € is 3 bytes at [2,5)
			DeadLetter{Reason: ReasonParse, Detail: "e", Raw: []byte("ab"), Truncated: true, OrigLen: 7}},
		{"cut on a rune start", errors.New("e"), "ab€cd", 5,
			DeadLetter{Reason: ReasonParse, Detail: "e", Raw: []byte("ab€"), Truncated: true, OrigLen: 7}},
		{"default limit", errors.New("e"), strings.Repeat("a", DefaultMaxDeadLetterRaw+1), 0,
			DeadLetter{Reason: ReasonParse, Detail: "e", Raw: []byte(strings.Repeat("a", DefaultMaxDeadLetterRaw)),
				Truncated: true, OrigLen: DefaultMaxDeadLetterRaw + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(tt.raw)
			got := NewDeadLetter(42, "src", tt.err, raw, tt.maxRaw)
			tt.want.TimeMs, tt.want.Source = 42, "src"
			require.Equal(t, tt.want, got)
			if len(raw) > 0 {
				raw[0] = '!' // the caller reuses its buffer
				require.NotEqual(t, byte('!'), got.Raw[0], "Raw must be a copy")
			}
		})
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "wrapped: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }

func TestKafkaSource(t *testing.T) {
	require.Equal(t, "keyheat.raw:3@1187", KafkaSource("keyheat.raw", 3, 1187))
	require.Equal(t, "t:0@-1", KafkaSource("t", 0, -1))
}

func TestDeadLetterJSON(t *testing.T) {
	tests := []struct {
		name string
		d    DeadLetter
		want string
	}{
		{"text raw", DeadLetter{TimeMs: 1767225600456, Source: "keyheat.raw:3@1187", Reason: ReasonParse,
			Detail: "expected '{'", Raw: []byte("GET /x \"q\"\n"), Truncated: true, OrigLen: 70211},
			`{"ts":1767225600456,"source":"keyheat.raw:3@1187","reason":"parse","detail":"expected '{'","raw":"GET /x \"q\"\n","truncated":true,"orig_len":70211}`},
		{"binary raw", DeadLetter{TimeMs: 1, Source: SourceStdin, Reason: ReasonKeyNotUTF8, Raw: []byte{0xc1, 1, 0xff}, OrigLen: 3},
			`{"ts":1,"source":"stdin","reason":"key_not_utf8","raw_b64":"wQH/","orig_len":3}`},
		{"minimal", DeadLetter{Reason: ReasonEmptyKey}, `{"ts":0,"source":"","reason":"empty_key"}`},
		{"unicode", DeadLetter{Source: "/var/log/日本.log", Reason: ReasonParse, Raw: []byte("😀\u2028"), OrigLen: 7},
			`{"ts":0,"source":"/var/log/日本.log","reason":"parse","raw":"😀\u2028","orig_len":7}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendDeadLetter(nil, &tt.d)
			require.Equal(t, tt.want, string(got))
			require.True(t, json.Valid(got))

			var back DeadLetter
			require.NoError(t, DecodeDeadLetter(got, &back))
			require.Equal(t, tt.d, back)

			// encoding/json goes through the same form.
			viaStd, err := json.Marshal(tt.d)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(viaStd))
			var std DeadLetter
			require.NoError(t, json.Unmarshal(viaStd, &std))
			require.Equal(t, tt.d, std)
		})
	}
}

func TestDecodeDeadLetterLenient(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want DeadLetter
	}{
		{"any order, whitespace, unknown members", ` { "orig_len" : 3 , "x" : {"y":[1]}, "raw":"a\/b", "reason":"parse" } `,
			DeadLetter{Reason: ReasonParse, Raw: []byte("a/b"), OrigLen: 3}},
		{"escaped base64", `{"raw_b64":"wQH\/"}`, DeadLetter{Raw: []byte{0xc1, 1, 0xff}}},
		{"empty raw is nil", `{"raw":""}`, DeadLetter{}},
		{"unknown reason kept", `{"reason":"future_reason"}`, DeadLetter{Reason: "future_reason"}},
		{"nulls", `{"truncated":null,"raw":null,"detail":null}`, DeadLetter{}},
		{"null orig_len is absent", `{"raw":"abc","orig_len":null}`, DeadLetter{Raw: []byte("abc")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DeadLetter{Source: "stale", Raw: []byte("stale")}
			require.NoError(t, DecodeDeadLetter([]byte(tt.src), &d))
			require.Equal(t, tt.want, d)
		})
	}
}

func TestDecodeDeadLetterRejects(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		detail string
	}{
		{"empty", ``, "expected '{'"},
		{"not an object", `[]`, "expected '{'"},
		{"truncated", `{"ts":1`, "expected ',' or '}'"},
		{"trailing", `{} {}`, "unexpected data"},
		{"both raws", `{"raw":"a","raw_b64":"YQ=="}`, `both "raw" and "raw_b64"`},
		{"bad base64", `{"raw_b64":"YQ"}`, "not standard base64"},
		{"url base64", `{"raw_b64":"_-8="}`, "not standard base64"},
		{"negative orig_len", `{"orig_len":-1}`, "out of range"},
		{"orig_len below raw", `{"raw":"abc","orig_len":2}`, `"orig_len" is shorter`},
		{"truncated not bool", `{"truncated":"yes"}`, "must be true or false"},
		{"reason not string", `{"reason":1}`, `"reason" must be a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DeadLetter{Source: "stale"}
			err := DecodeDeadLetter([]byte(tt.src), &d)
			require.ErrorIs(t, err, ErrMalformedDeadLetter)
			require.ErrorContains(t, err, tt.detail)
			require.Equal(t, DeadLetter{}, d, "reset on error")
		})
	}
}
