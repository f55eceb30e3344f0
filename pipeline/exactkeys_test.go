package pipeline

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/sketch"
)

// lookup tells apart keys that differ in a single byte, at every length
// (the word comparisons of 8 to 24 bytes, shorter and arena keys
// around them) and in two apps, with touch before every lookup as the
// windows call them: the table agrees with a map, before it fills and
// after, when the keys it holds keep counting and the others are
// refused for the rest of the window. With hashes cut to 3 bits, every
// key has the same front-cache tag and index fingerprint as many others,
// and only the comparison of the keys tells them apart. (The table takes
// the hash from its caller; it hashes keys itself only to grow and to
// reset, which sizing it for every key up front and one window avoid.)
func TestExactTableKeysDifferingInOneByte(t *testing.T) {
	type ak struct {
		app uint16
		key string
	}
	var keys []ak
	for n := 1; n <= 40; n++ {
		base := []byte(strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz!?.,", 1)[:n])
		for app := range uint16(2) {
			keys = append(keys, ak{app, string(base)})
			for i := range n {
				b := []byte(string(base))
				b[i] ^= 0x20
				keys = append(keys, ak{app, string(b)})
			}
		}
	}
	for _, tc := range []struct {
		maxKeys int
		hash    func(string) uint64
	}{
		{len(keys), sketch.Hash},
		{len(keys) / 3, sketch.Hash},
		{len(keys), func(k string) uint64 { return sketch.Hash(k) & 7 }},
		{len(keys) / 3, func(k string) uint64 { return sketch.Hash(k) & 7 }},
	} {
		maxKeys := tc.maxKeys
		r := rand.New(rand.NewPCG(1, uint64(maxKeys)))
		tab := newExactTable(maxKeys, 1<<20, maxKeys)
		counts := map[ak]uint64{}
		refused := map[ak]bool{}
		for range 40 * len(keys) {
			k := keys[r.IntN(len(keys))]
			h := tc.hash(k.key)
			tab.touch(h)
			e := tab.lookup(h, k.app, k.key)
			if e == nil && !tab.full {
				e = tab.insert(h, k.app, k.key)
			}
			if e == nil {
				require.Zero(t, counts[k], "%d %q held, then not found", k.app, k.key)
				refused[k] = true
				continue
			}
			require.False(t, refused[k], "%d %q refused, then counted", k.app, k.key)
			require.Equal(t, k.app, e.app)
			require.Equal(t, k.key, tab.key(e))
			tab.count(e, 1, 1, 0, 0)
			counts[k]++
		}
		require.Len(t, tab.ents, len(counts))
		require.Equal(t, maxKeys < len(keys), tab.full)
		for i := range tab.ents {
			e := &tab.ents[i]
			require.Equal(t, counts[ak{e.app, tab.key(e)}], e.events, "%d %q", e.app, tab.key(e))
		}
	}
}
