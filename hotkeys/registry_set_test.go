package hotkeys

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEntrySetAgreesWithMap: after any sequence of puts, deletes and
// publishes, the set answers every key as a map of the published state
// does: same keys in, same entries, and keys in two apps kept apart.
func TestEntrySetAgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := newEntrySet()
	w := newSetWriter(s)
	model := map[setKey]*Entry{}
	published := map[setKey]Entry{}
	apps := []string{"shop", "api", ""}
	long := strings.Repeat("x", inlineKey)
	keyOf := func(i int) string {
		switch i % 6 {
		case 0:
			return "k" + strconv.Itoa(i)
		case 1:
			return "bin\xff" + strconv.Itoa(i)
		case 2:
			return strconv.Itoa(i) // the same key in several apps
		case 3:
			// Longer than a slot holds, alike in what it holds.
			return long + strconv.Itoa(i)
		case 4:
			return long[:inlineKey-len(strconv.Itoa(i))] + strconv.Itoa(i) // exactly what a slot holds
		}
		return ""
	}
	check := func() {
		t.Helper()
		for i := range 2100 { // 2000 keys are written, 100 never
			for _, app := range apps {
				k := setKey{app, keyOf(i)}
				got := s.lookup(k.app, k.key)
				want, ok := published[k]
				switch {
				case !ok && got != nil:
					t.Fatalf("%q/%q found, not in the model", k.app, k.key)
				case ok && got == nil:
					t.Fatalf("%q/%q not found", k.app, k.key)
				case ok && *got != want:
					require.Equal(t, want, *got)
				}
			}
		}
	}
	check()
	for round := range 60 {
		for range rng.IntN(400) {
			k := setKey{apps[rng.IntN(len(apps))], keyOf(rng.IntN(2000))}
			if rng.IntN(3) == 0 {
				w.del(k.app, k.key)
				delete(model, k)
				continue
			}
			e := &Entry{App: k.app, Key: k.key, Rate: float64(round), Source: SourceDetector, Status: StatusHot}
			w.put(e)
			model[k] = e
		}
		check() // nothing shows before publish
		w.publish()
		clear(published)
		for k, e := range model {
			published[k] = *e
		}
		check()
	}
	require.NotEmpty(t, published)
}

// TestEntrySetPastAppIndex: apps past the 65535 a slot can name are
// compared through the entry.
func TestEntrySetPastAppIndex(t *testing.T) {
	s := newEntrySet()
	w := newSetWriter(s)
	for i := range noApp {
		name := "app" + strconv.Itoa(i)
		w.apps = append(w.apps, name)
		w.appIdx[name] = uint16(i)
	}
	w.put(&Entry{App: "shop", Key: "k"})
	w.put(&Entry{App: "app7", Key: "k"})
	w.publish()
	require.NotNil(t, s.lookup("shop", "k"))
	require.NotNil(t, s.lookup("app7", "k"))
	require.Nil(t, s.lookup("app8", "k"))
	require.Nil(t, s.lookup("shoq", "k"))
}

// TestEntrySetConcurrentReaders: readers looking up while the writer
// publishes never see a torn table (run with -race): every entry found is
// the key asked for, and a key never deleted is always found.
func TestEntrySetConcurrentReaders(t *testing.T) {
	s := newEntrySet()
	w := newSetWriter(s)
	w.put(&Entry{App: "a", Key: "always", Status: StatusHot})
	w.publish()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var lookups atomic.Int64
	for range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := "k" + strconv.Itoa(i%500)
				if e := s.lookup("a", key); e != nil && (e.Key != key || e.App != "a") {
					t.Errorf("lookup %q found %q/%q", key, e.App, e.Key)
					return
				}
				if s.lookup("a", "always") == nil {
					t.Errorf("a key never deleted was not found")
					return
				}
				lookups.Add(1)
			}
		})
	}
	for round := range 200 {
		for i := range 500 {
			if (i+round)%3 == 0 {
				w.del("a", "k"+strconv.Itoa(i))
			} else {
				w.put(&Entry{App: "a", Key: "k" + strconv.Itoa(i), Rate: float64(round)})
			}
		}
		w.publish()
	}
	for lookups.Load() < 1000 {
		// Readers had their turn on a starved machine too.
		w.publish()
	}
	stop.Store(true)
	wg.Wait()
}

// TestIsHotDoesNotAllocate holds IsHot and Get to no allocation, hit or
// miss; a benchmark measures their speed.
func TestIsHotDoesNotAllocate(t *testing.T) {
	s := newEntrySet()
	w := newSetWriter(s)
	for i := range 1000 {
		w.put(&Entry{App: "shop", Key: "k" + strconv.Itoa(i)})
	}
	w.publish()
	f := &Follower{set: s}
	keys := []string{"k1", "k999", "nope", ""}
	allocs := testing.AllocsPerRun(100, func() {
		for _, k := range keys {
			_ = f.IsHot("shop", k)
			_, _ = f.Get("shop", k)
		}
	})
	require.Zero(t, allocs)
}
