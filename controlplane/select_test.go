package controlplane

import (
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/hotkeys"
)

// TestSelectPageModel holds selectPage to the obvious way: filter, sort,
// skip to the cursor, take n.
func TestSelectPageModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	apps := []string{"a", "ab", "b", ""}
	for round := range 2000 {
		var set []hotkeys.Entry
		seen := map[position]bool{}
		for range rng.IntN(60) {
			p := position{apps[rng.IntN(len(apps))], string([]byte{byte('a' + rng.IntN(4)), byte(rng.IntN(256))})[:1+rng.IntN(2)]}
			if seen[p] {
				continue
			}
			seen[p] = true
			set = append(set, hotkeys.Entry{App: p.app, Key: p.key, Source: hotkeys.Source(1 + rng.IntN(2))})
		}
		var f filter
		if rng.IntN(2) == 0 {
			f.app = apps[rng.IntN(len(apps)-1)]
		}
		if rng.IntN(3) == 0 {
			f.source = hotkeys.Source(1 + rng.IntN(2))
		}
		var after *position
		if rng.IntN(2) == 0 {
			after = &position{apps[rng.IntN(len(apps))], string(rune('a' + rng.IntN(5)))}
		}
		n := 1 + rng.IntN(10)

		var want []hotkeys.Entry
		total := 0
		for _, e := range set {
			if f.match(&e) {
				total++
				if after == nil || comparePos(e.App, e.Key, *after) > 0 {
					want = append(want, e)
				}
			}
		}
		slices.SortFunc(want, func(a, b hotkeys.Entry) int { return compareEntries(&a, &b) })
		want = want[:min(n, len(want))]

		got, gotTotal := selectPage(slices.Values(set), f, after, n)
		require.Equal(t, total, gotTotal, "round %d", round)
		if len(want) == 0 {
			require.Empty(t, got, "round %d", round)
			continue
		}
		require.Equal(t, want, got, "round %d", round)
	}
}

func FuzzCursor(f *testing.F) {
	f.Add("shop", "product:42", "")
	f.Add("", "", "AQA")
	f.Add("a\x00b", "\xff/%", "AQVzaG9wAA")
	f.Fuzz(func(t *testing.T, app, key, raw string) {
		p, err := decodeCursor(encodeCursor(app, key))
		if err != nil || p.app != app || p.key != key {
			t.Fatalf("round trip of (%q, %q): %v, %q", app, key, err, p)
		}
		if p, err := decodeCursor(raw); err == nil {
			// Whatever decodes encodes back to a cursor for the same place.
			q, err := decodeCursor(encodeCursor(p.app, p.key))
			if err != nil || q != p {
				t.Fatalf("%q decodes to %q, which does not round-trip: %v", raw, p, err)
			}
		}
	})
}

func FuzzKeyB64(f *testing.F) {
	f.Add([]byte("product:42"), "")
	f.Add([]byte{0xff, 0xfe, 0xfb}, "a+b=")
	f.Fuzz(func(t *testing.T, key []byte, raw string) {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			got, err := decodeKeyB64(enc.EncodeToString(key))
			if err != nil || got != string(key) {
				t.Fatalf("%x in %v: %q, %v", key, enc, got, err)
			}
		}
		_, _ = decodeKeyB64(raw)
	})
}
