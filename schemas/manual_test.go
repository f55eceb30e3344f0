package schemas_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

// recordKeyCases are app/key pairs whose record keys must stay apart and
// parse back: lengths that look like part of the key, colons, digits,
// empty parts and bytes that are not UTF-8.
var recordKeyCases = []struct{ app, key string }{
	{"shop", "product:42"},
	{"", ""},
	{"", "k"},
	{"a", ""},
	{"4:shop", "x"},
	{"12", "34:56"},
	{"m:", "m:"},
	{"app", "a\xff"},
	{"app", "bin\xff\x00key"},
	{"0123456789", "k"},
}

// TestRecordKeysRoundTrip: both registry record keys parse back to the app
// and key they were built from, and a manual record key is never a
// detector one, so compaction never merges the two.
func TestRecordKeysRoundTrip(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range recordKeyCases {
		hk := schemas.HotKeyRecordKey(tc.app, tc.key)
		mk := schemas.ManualRecordKey(tc.app, tc.key)
		require.Equal(t, append([]byte("m:"), hk...), mk)
		require.False(t, schemas.IsManualRecordKey(hk), "detector key %q", hk)
		require.True(t, schemas.IsManualRecordKey(mk), "manual key %q", mk)

		app, key, err := schemas.ParseHotKeyRecordKey(hk)
		require.NoError(t, err)
		require.Equal(t, tc, struct{ app, key string }{app, key})
		app, key, err = schemas.ParseManualRecordKey(mk)
		require.NoError(t, err)
		require.Equal(t, tc, struct{ app, key string }{app, key})

		for _, k := range []string{string(hk), string(mk)} {
			prev, dup := seen[k]
			require.False(t, dup, "record key %q of %q/%q already made by %s", k, tc.app, tc.key, prev)
			seen[k] = tc.app + "/" + tc.key
		}
	}
}

func TestParseRecordKeyRejects(t *testing.T) {
	for _, tc := range []struct{ name, key string }{
		{"empty", ""},
		{"no colon", "4shop"},
		{"no length", ":shop"},
		{"leading zero", "04:shop"},
		{"sign", "+4:shop"},
		{"negative", "-1:shop"},
		{"not a digit", "4a:shopx"},
		{"too long", "5:shop"},
		{"length overflow", "99999999999:x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := schemas.ParseHotKeyRecordKey([]byte(tc.key))
			require.Error(t, err)
			_, _, err = schemas.ParseManualRecordKey([]byte("m:" + tc.key))
			require.Error(t, err)
		})
	}
	_, _, err := schemas.ParseManualRecordKey([]byte("4:shopproduct:42"))
	require.Error(t, err, "a detector record key is not a manual one")
}

func validPromote() schemas.ManualEntry {
	return schemas.ManualEntry{Version: schemas.ManualVersion, Action: schemas.ManualPromote, App: "shop", Key: "product:42",
		Mitigation: &schemas.Mitigation{Kind: schemas.MitigationSplit, Split: 8}, TTLMs: 600_000, CreatedMs: 1767225600000,
		LocalTTLMs: 2000, By: "alice", Reason: "flash sale"}
}

// TestManualEntryRoundTrip: every valid shape, binary keys included, reads
// back equal; the JSON has the documented field names.
func TestManualEntryRoundTrip(t *testing.T) {
	demote := schemas.ManualEntry{Version: schemas.ManualVersion, Action: schemas.ManualDemote, App: "shop", Key: "product:42",
		TTLMs: 1, CreatedMs: 1}
	var cases []schemas.ManualEntry
	for _, m := range []*schemas.Mitigation{
		{Kind: schemas.MitigationSplit, Split: 2},
		{Kind: schemas.MitigationSplit, Split: 1024},
		{Kind: schemas.MitigationLocalCache},
		{Kind: schemas.MitigationCoalesce},
	} {
		p := validPromote()
		p.Mitigation = m
		cases = append(cases, p)
	}
	cases = append(cases, demote)
	for _, k := range []string{"a\xff", "a\xfe", "bin\xff\x00key", "\x80", ""} {
		p, d := validPromote(), demote
		p.Key, d.Key = k, k
		cases = append(cases, p, d)
	}
	for _, m := range cases {
		b, err := m.AppendJSON([]byte("prefix"))
		require.NoError(t, err)
		require.Equal(t, "prefix", string(b[:6]), "AppendJSON appends")
		got, err := schemas.DecodeManualEntry(b[6:])
		require.NoError(t, err, "%s", b[6:])
		require.Equal(t, m, *got)
		require.Equal(t, []byte(m.Key), []byte(got.Key))

		var raw map[string]any
		require.NoError(t, json.Unmarshal(b[6:], &raw))
		_, hasB64 := raw["key_b64"]
		require.Equal(t, !utf8.ValidString(m.Key), hasB64, "key_b64 only for a key that is not UTF-8: %s", b[6:])
		_, hasMit := raw["mitigation"]
		require.Equal(t, m.Action == schemas.ManualPromote, hasMit)
	}

	p := validPromote()
	b, err := p.AppendJSON(nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"action":"promote","app":"shop","key":"product:42","mitigation":{"kind":"split","split":8},
		"ttl_ms":600000,"created_ms":1767225600000,"local_ttl_ms":2000,"by":"alice","reason":"flash sale"}`, string(b))
	require.Equal(t, int64(1767225600000+600_000), p.ExpiresMs())
}

// TestDecodeManualEntryRejects: each rule Validate checks, from the JSON a
// careless writer could produce, with an error that names the field.
func TestDecodeManualEntryRejects(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
	}{
		{"not JSON", `{"v":1`, "decode manual entry"},
		{"empty", ``, "decode manual entry"},
		{"version", `{"v":2,"action":"demote","app":"a","key":"k","ttl_ms":1,"created_ms":1}`, "version 2"},
		{"no version", `{"action":"demote","app":"a","key":"k","ttl_ms":1,"created_ms":1}`, "version 0"},
		{"action", `{"v":1,"action":"pin","app":"a","key":"k","ttl_ms":1,"created_ms":1}`, `action "pin"`},
		{"no ttl", `{"v":1,"action":"demote","app":"a","key":"k","created_ms":1}`, "ttl_ms is 0"},
		{"negative ttl", `{"v":1,"action":"demote","app":"a","key":"k","ttl_ms":-5,"created_ms":1}`, "ttl_ms is -5"},
		{"no created", `{"v":1,"action":"demote","app":"a","key":"k","ttl_ms":1}`, "created_ms is 0"},
		{"overflow", `{"v":1,"action":"demote","app":"a","key":"k","ttl_ms":9223372036854775807,"created_ms":2}`, "overflows"},
		{"promote without mitigation", `{"v":1,"action":"promote","app":"a","key":"k","ttl_ms":1,"created_ms":1}`, "mitigation is missing"},
		{"unknown kind", `{"v":1,"action":"promote","app":"a","key":"k","mitigation":{"kind":"shard"},"ttl_ms":1,"created_ms":1}`, `kind "shard"`},
		{"split 0", `{"v":1,"action":"promote","app":"a","key":"k","mitigation":{"kind":"split"},"ttl_ms":1,"created_ms":1}`, "split is 0"},
		{"split 1", `{"v":1,"action":"promote","app":"a","key":"k","mitigation":{"kind":"split","split":1},"ttl_ms":1,"created_ms":1}`, "split is 1"},
		{"split 6", `{"v":1,"action":"promote","app":"a","key":"k","mitigation":{"kind":"split","split":6},"ttl_ms":1,"created_ms":1}`, "split is 6"},
		{"split on cache", `{"v":1,"action":"promote","app":"a","key":"k","mitigation":{"kind":"local_cache","split":4},"ttl_ms":1,"created_ms":1}`, "has split 4"},
		{"negative local ttl", `{"v":1,"action":"promote","app":"a","key":"k","mitigation":{"kind":"coalesce"},"ttl_ms":1,"created_ms":1,"local_ttl_ms":-1}`, "local_ttl_ms is -1"},
		{"demote with mitigation", `{"v":1,"action":"demote","app":"a","key":"k","mitigation":{"kind":"local_cache"},"ttl_ms":1,"created_ms":1}`, "a demote has no mitigation"},
		{"demote with local ttl", `{"v":1,"action":"demote","app":"a","key":"k","ttl_ms":1,"created_ms":1,"local_ttl_ms":5}`, "no local_ttl_ms"},
		{"bad key_b64", `{"v":1,"action":"demote","app":"a","key":"k","key_b64":"!!","ttl_ms":1,"created_ms":1}`, "decode manual entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := schemas.DecodeManualEntry([]byte(tc.json))
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, got)
		})
	}

	m := validPromote()
	m.App = "a\xff"
	_, err := m.AppendJSON(nil)
	require.ErrorContains(t, err, "app is not UTF-8", "an app that JSON cannot carry is refused, not mangled")
	m = validPromote()
	m.TTLMs = 0
	b, err := m.AppendJSON([]byte("x"))
	require.ErrorContains(t, err, "ttl_ms is 0")
	require.Equal(t, "x", string(b), "nothing appended on error")
}

// FuzzDecodeManualEntry: the decoder never panics; what it accepts is
// valid, and survives a round trip unchanged.
func FuzzDecodeManualEntry(f *testing.F) {
	p := validPromote()
	b, _ := p.AppendJSON(nil)
	f.Add(b)
	p.Key = "a\xff"
	b, _ = p.AppendJSON(nil)
	f.Add(b)
	f.Add([]byte(`{"v":1,"action":"demote","app":"a","key":"k","ttl_ms":1,"created_ms":1}`))
	f.Add([]byte(`{"v":1,"action":"promote","app":"a","key":"k","mitigation":{"kind":"split","split":6},"ttl_ms":1,"created_ms":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := schemas.DecodeManualEntry(data)
		if err != nil {
			require.Nil(t, m)
			return
		}
		require.NoError(t, m.Validate())
		b, err := m.AppendJSON(nil)
		require.NoError(t, err)
		back, err := schemas.DecodeManualEntry(b)
		require.NoError(t, err)
		require.Equal(t, m, back)
	})
}

// FuzzParseRecordKey: a record key that parses is exactly the one its app
// and key build, in either form.
func FuzzParseRecordKey(f *testing.F) {
	for _, tc := range recordKeyCases {
		f.Add(schemas.HotKeyRecordKey(tc.app, tc.key))
		f.Add(schemas.ManualRecordKey(tc.app, tc.key))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if app, key, err := schemas.ParseHotKeyRecordKey(data); err == nil {
			require.Equal(t, data, schemas.HotKeyRecordKey(app, key))
		}
		if app, key, err := schemas.ParseManualRecordKey(data); err == nil {
			require.Equal(t, data, schemas.ManualRecordKey(app, key))
		}
	})
}
