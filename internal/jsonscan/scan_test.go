package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// validate scans src as one JSON value, as the decoders do.
func validate(src []byte) error {
	s := Scanner{Src: src}
	s.SkipWS()
	if err := s.SkipValue(0); err != nil {
		return err
	}
	return s.End()
}

func TestSkipValue(t *testing.T) {
	cases := []struct {
		src string
		ok  bool
	}{
		{`{}`, true},
		{` [ 1 , -0.5e+3 , "a\u00e9\"" , true , false , null , { "k" : [ ] } ] `, true},
		{`{"a":{"b":[1,{"c":null}]}}`, true},
		{`"\ud800"`, true}, // a lone surrogate is valid JSON text
		{`01`, false},
		{`1.`, false},
		{`1e`, false},
		{`-`, false},
		{`"\x41"`, false},
		{`"\u12"`, false},
		{"\"a\x01\"", false},
		{`"unterminated`, false},
		{`{"a" 1}`, false},
		{`{"a":1,}`, false},
		{`{a:1}`, false},
		{`[1 2]`, false},
		{`[1,]`, false},
		{`tru`, false},
		{`nul`, false},
		{`{} {}`, false},
		{``, false},
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), true},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), false},
		{strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), false},
	}
	for _, tc := range cases {
		err := validate([]byte(tc.src))
		if tc.ok {
			require.NoError(t, err, "%.60q", tc.src)
		} else {
			require.Error(t, err, "%.60q", tc.src)
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
		}
	}
}

func TestInt64(t *testing.T) {
	cases := []struct {
		src      string
		min, max int64
		want     int64
		ok       bool
	}{
		{"42", 0, 100, 42, true},
		{"-7", -10, 0, -7, true},
		{"1.9", 0, 10, 1, true},
		{"-1.9", -10, 10, -1, true},
		{"1.5e3", 0, 2000, 1500, true},
		{"1e-400", 0, 1, 0, true},
		{"101", 0, 100, 0, false},
		{"9223372036854775807", -1 << 63, 1<<63 - 1, 1<<63 - 1, true},
		{"9223372036854775808", -1 << 63, 1<<63 - 1, 0, false},
		{"9.3e18", -1 << 63, 1<<63 - 1, 0, false},
		{"1e400", -1 << 63, 1<<63 - 1, 0, false},
	}
	for _, tc := range cases {
		s := Scanner{Src: []byte(tc.src)}
		n, err := s.Number()
		require.NoError(t, err, tc.src)
		got, err := s.Int64(n, tc.min, tc.max)
		if !tc.ok {
			require.Error(t, err, tc.src)
			continue
		}
		require.NoError(t, err, tc.src)
		require.Equal(t, tc.want, got, tc.src)
	}
}

func TestMemberName(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`"key":1`, "key"},
		{` "key" : 1`, "key"},
		{`"k\u0065y":1`, "key"},
		{`"日本":1`, "日本"},
	} {
		s := Scanner{Src: []byte(tc.src)}
		name, err := s.MemberName()
		require.NoError(t, err, tc.src)
		require.Equal(t, tc.want, name)
		require.Equal(t, byte('1'), s.Peek(), "MemberName leaves the position at the value")
	}
	for _, src := range []string{`key:1`, `"key"1`, `"key`} {
		s := Scanner{Src: []byte(src)}
		_, err := s.MemberName()
		require.Error(t, err, src)
	}
}

func TestAppendUnescaped(t *testing.T) {
	cases := []struct {
		raw, want string
		strictOK  bool
	}{
		{`plain`, "plain", true},
		{`a\"\\\/\b\f\n\r\t`, "a\"\\/\b\f\n\r\t", true},
		{`\u0041\u00e9\u4e2d\ud83d\ude00`, "Aé中😀", true},
		{`\ud800x`, "\uFFFDx", false},
		{`\udc00`, "\uFFFD", false},
		{`\ud800\u0041`, "\uFFFDA", false},
		{"a\xffb", "a\uFFFDb", false},
		{"日本", "日本", true},
	}
	for _, tc := range cases {
		s := Scanner{Src: []byte(`"` + tc.raw + `"`)}
		sp, err := s.String()
		require.NoError(t, err, tc.raw)
		raw := s.Src[sp.Start:sp.End]
		got, ok := AppendUnescaped(nil, raw, sp.Flags, false)
		require.True(t, ok)
		require.Equal(t, tc.want, string(got), tc.raw)
		got, ok = AppendUnescaped([]byte("pre:"), raw, sp.Flags, true)
		require.Equal(t, tc.strictOK, ok, tc.raw)
		if ok {
			require.Equal(t, "pre:"+tc.want, string(got))
		}
	}
}

// FuzzScan: the scanner accepts exactly the JSON texts encoding/json
// accepts (within MaxDepth), and every string it scans unescapes to what
// encoding/json decodes, and quotes back to the same value.
func FuzzScan(f *testing.F) {
	for _, seed := range []string{
		`{"ts":1767225600123,"key":"user:42","x":[1,-2.5e3,true,null,{"y":"\u00e9\ud83d\ude00"}]}`,
		`"\ud800\u0041"`, "\"a\xffb\"", `[01]`, `{"a":}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := validate(data)
		if err != nil {
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			if !strings.Contains(se.Msg, "too deep") {
				require.False(t, json.Valid(data), "rejected valid JSON: %v", err)
			}
			return
		}
		require.True(t, json.Valid(data), "accepted invalid JSON")

		s := Scanner{Src: data}
		s.SkipWS()
		if s.Peek() != '"' {
			return
		}
		sp, err := s.String()
		require.NoError(t, err)
		got, ok := AppendUnescaped(nil, data[sp.Start:sp.End], sp.Flags, false)
		require.True(t, ok)
		var want string
		require.NoError(t, json.Unmarshal(data, &want))
		require.Equal(t, want, string(got))
		if strict, ok := AppendUnescaped(nil, data[sp.Start:sp.End], sp.Flags, true); ok {
			require.Equal(t, want, string(strict))
			require.True(t, utf8.Valid(strict))
		}
		var back string
		require.NoError(t, json.Unmarshal(AppendQuoted(nil, want), &back))
		require.Equal(t, want, back)
	})
}
