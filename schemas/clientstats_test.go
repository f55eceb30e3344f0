package schemas_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

func validClientStats() *schemas.ClientStats {
	return &schemas.ClientStats{
		Version: schemas.ClientStatsVersion, Client: "web-7/4121", App: "shop",
		TimeMs: 1767225600000, IntervalMs: 5000, StartedMs: 1767225000000,
		Cache: &schemas.ClientCacheTotals{Hits: 90210, Misses: 120, Loads: 31, Coalesced: 89, ColdLoads: 5512, Entries: 12, Following: true},
		Split: &schemas.ClientSplitTotals{SplitCalls: 4100, PassedCalls: 70211, Keys: 1},
		Keys: []schemas.ClientStatsKey{
			{App: "shop", Key: "product:42", Hits: 90000, Misses: 100, Loads: 25, Coalesced: 75},
			{App: "shop", Key: "views:product:42", SplitShards: 8, SplitWrites: 4000, SplitReads: 100},
			{App: "shop", Key: "bin\xff\x00key", Hits: 1},
		},
		KeysOmitted: 3,
	}
}

// TestClientStatsRoundTrip: a record decodes to what was encoded, a key
// that is not UTF-8 included (through key_b64), and absent components stay
// absent.
func TestClientStatsRoundTrip(t *testing.T) {
	s := validClientStats()
	b, err := s.AppendJSON([]byte("prefix"))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("prefix")))
	b = b[len("prefix"):]
	require.Contains(t, string(b), `"key_b64":"Ymlu/wBrZXk="`, "a key that is not UTF-8 carries its bytes")
	got, err := schemas.DecodeClientStats(b)
	require.NoError(t, err)
	require.Equal(t, s, got)
	require.Nil(t, got.Follower)
	require.Nil(t, got.Reporter)
}

// TestClientStatsJSONShape pins the field names readers in other languages
// rely on, as the doc comment shows them.
func TestClientStatsJSONShape(t *testing.T) {
	s := validClientStats()
	s.Keys = s.Keys[:2]
	s.Follower = &schemas.ClientFollowerTotals{Entries: 14, Ready: true}
	s.Reporter = &schemas.ClientReporterTotals{Recorded: 10, Sent: 9, Dropped: 1}
	b, err := s.AppendJSON(nil)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	keys := func(v any) []string {
		var ks []string
		for k := range v.(map[string]any) {
			ks = append(ks, k)
		}
		return ks
	}
	require.ElementsMatch(t, []string{"v", "client", "app", "time_ms", "interval_ms", "started_ms",
		"cache", "split", "follower", "reporter", "keys", "keys_omitted"}, keys(m))
	require.ElementsMatch(t, []string{"hits", "misses", "loads", "coalesced", "load_errors", "cold_loads",
		"stale_served", "timeouts", "entries", "following"}, keys(m["cache"]))
	require.ElementsMatch(t, []string{"split_calls", "passed_calls", "keys", "folds", "fold_errors"}, keys(m["split"]))
	require.ElementsMatch(t, []string{"entries", "lag", "ready", "failing", "decode_errors"}, keys(m["follower"]))
	require.ElementsMatch(t, []string{"recorded", "sent", "failed", "dropped", "pending"}, keys(m["reporter"]))
	ks := m["keys"].([]any)
	require.ElementsMatch(t, []string{"app", "key", "hits", "misses", "loads", "coalesced"}, keys(ks[0]))
	require.ElementsMatch(t, []string{"app", "key", "split_shards", "split_writes", "split_reads"}, keys(ks[1]))
	require.EqualValues(t, 1, m["v"])
}

func TestClientStatsValidate(t *testing.T) {
	require.NoError(t, validClientStats().Validate())
	for _, tc := range []struct {
		name string
		edit func(*schemas.ClientStats)
		want string
	}{
		{"version", func(s *schemas.ClientStats) { s.Version = 2 }, "version 2"},
		{"no client", func(s *schemas.ClientStats) { s.Client = "" }, "client is empty"},
		{"long client", func(s *schemas.ClientStats) { s.Client = strings.Repeat("c", 257) }, "client: 257 bytes"},
		{"client not utf-8", func(s *schemas.ClientStats) { s.Client = "c\xff" }, "client: not UTF-8"},
		{"app not utf-8", func(s *schemas.ClientStats) { s.App = "a\xff" }, "app: not UTF-8"},
		{"no time", func(s *schemas.ClientStats) { s.TimeMs = 0 }, "time_ms is 0"},
		{"no interval", func(s *schemas.ClientStats) { s.IntervalMs = 0 }, "interval_ms is 0"},
		{"long interval", func(s *schemas.ClientStats) { s.IntervalMs = schemas.MaxClientStatsIntervalMs + 1 }, "interval_ms is"},
		{"negative started", func(s *schemas.ClientStats) { s.StartedMs = -1 }, "started_ms is -1"},
		{"negative omitted", func(s *schemas.ClientStats) { s.KeysOmitted = -1 }, "keys_omitted is -1"},
		{"empty key", func(s *schemas.ClientStats) { s.Keys[1].Key = "" }, "keys[1]: key of 0 bytes"},
		{"long key", func(s *schemas.ClientStats) { s.Keys[0].Key = strings.Repeat("k", schemas.MaxClientStatsKeyBytes+1) }, "keys[0]: key of 4097 bytes"},
		{"key app not utf-8", func(s *schemas.ClientStats) { s.Keys[2].App = "\xff" }, "keys[2]: app: not UTF-8"},
		{"negative shards", func(s *schemas.ClientStats) { s.Keys[1].SplitShards = -1 }, "split_shards is -1"},
		{"duplicate key", func(s *schemas.ClientStats) { s.Keys[1].Key = s.Keys[0].Key }, "keys[1]: the key is listed twice"},
		{"too many keys", func(s *schemas.ClientStats) {
			s.Keys = nil
			for i := range schemas.MaxClientStatsKeys + 1 {
				s.Keys = append(s.Keys, schemas.ClientStatsKey{App: "a", Key: fmt.Sprint(i)})
			}
		}, "over 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validClientStats()
			tc.edit(s)
			require.ErrorContains(t, s.Validate(), tc.want)
			_, err := s.AppendJSON(nil)
			require.ErrorContains(t, err, tc.want, "AppendJSON must validate")
			if strings.Contains(tc.want, "UTF-8") {
				return // JSON cannot carry the bytes: they arrive as U+FFFD
			}
			b, err := json.Marshal(s)
			require.NoError(t, err)
			_, err = schemas.DecodeClientStats(b)
			require.ErrorContains(t, err, tc.want, "DecodeClientStats must validate")
		})
	}
}

// TestDecodeClientStatsBounds: what a hostile record costs is bounded: a
// value over MaxClientStatsBytes is not parsed, and a keys array is not
// read past MaxClientStatsKeys elements.
func TestDecodeClientStatsBounds(t *testing.T) {
	good, err := validClientStats().AppendJSON(nil)
	require.NoError(t, err)

	huge := append(bytes.Repeat([]byte(" "), schemas.MaxClientStatsBytes), good...)
	_, err = schemas.DecodeClientStats(huge)
	require.ErrorIs(t, err, schemas.ErrClientStatsTooLarge)

	// A megabyte of empty objects: hundreds of thousands of keys.
	flood := []byte(`{"v":1,"client":"c","time_ms":1,"interval_ms":1,"started_ms":1,"keys":[`)
	for len(flood) < schemas.MaxClientStatsBytes-10 {
		flood = append(flood, "{},"...)
	}
	flood = append(flood, "{}]}"...)
	_, err = schemas.DecodeClientStats(flood)
	require.ErrorContains(t, err, "over 1024 keys")
	allocs := testing.AllocsPerRun(3, func() { _, _ = schemas.DecodeClientStats(flood) })
	require.Less(t, allocs, float64(20*schemas.MaxClientStatsKeys), "decoding stops at the key limit")

	for _, bad := range []string{``, `null`, `[]`, `{"v":1`, `{"v":1,"client":"c","time_ms":1,"interval_ms":1,"keys":{}}`,
		`{"v":1,"client":"c","time_ms":1,"interval_ms":1,"keys":[1]}`, `{"v":"1"}`,
		`{"v":1,"client":"c","time_ms":1,"interval_ms":1,"cache":{"hits":-1}}`} {
		_, err := schemas.DecodeClientStats([]byte(bad))
		require.Error(t, err, "%s", bad)
	}
	// keys null or absent: none.
	for _, ok := range []string{`{"v":1,"client":"c","time_ms":1,"interval_ms":1}`,
		`{"v":1,"client":"c","time_ms":1,"interval_ms":1,"keys":null}`} {
		s, err := schemas.DecodeClientStats([]byte(ok))
		require.NoError(t, err, ok)
		require.Empty(t, s.Keys)
	}
}

// TestClientStatsAppendTooLarge: a record whose encoding is over the limit
// is refused by the writer, so that readers never see one.
func TestClientStatsAppendTooLarge(t *testing.T) {
	s := validClientStats()
	s.Keys = nil
	for i := range schemas.MaxClientStatsKeys {
		// Not UTF-8: each key is written twice, escaped and in base64.
		s.Keys = append(s.Keys, schemas.ClientStatsKey{App: "a", Key: fmt.Sprintf("%04d", i) + strings.Repeat("\xff", 1000)})
	}
	_, err := s.AppendJSON(nil)
	require.ErrorContains(t, err, "list fewer keys")
}

// FuzzDecodeClientStats: DecodeClientStats never panics, and what it
// accepts encodes and decodes back to itself.
func FuzzDecodeClientStats(f *testing.F) {
	good, err := validClientStats().AppendJSON(nil)
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte(`{"v":1,"client":"c","time_ms":1,"interval_ms":1,"keys":[{"app":"a","key":"k","key_b64":"/w=="}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := schemas.DecodeClientStats(data)
		if err != nil {
			return
		}
		require.NoError(t, s.Validate())
		b, err := s.AppendJSON(nil)
		if err != nil {
			// Escaping can make a valid record's encoding longer than
			// its input, past the limit; nothing else may fail.
			require.ErrorContains(t, err, "list fewer keys")
			return
		}
		back, err := schemas.DecodeClientStats(b)
		require.NoError(t, err)
		require.Equal(t, s, back)
	})
}
