package controlplane_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func TestListQuery(t *testing.T) {
	r := newRegistry(t, 3)
	f := r.follower()
	a := r.server(f, controlplane.Config{Token: token})
	var recs []*kgo.Record
	for i := range 150 {
		recs = append(recs, bulkHot("shop", fmt.Sprintf("k%03d", i), float64(i)))
	}
	for i := range 20 {
		recs = append(recs, bulkHot("blog", fmt.Sprintf("post:%02d", i), 1))
	}
	r.produce(recs...)
	a.promote("shop", "k000m", controlplane.PromoteRequest{Mitigation: "local_cache", TTL: "1h", LocalTTL: "2s"})
	r.barrier(f)
	testenv.Eventually(t, "the promote", func() bool { return f.IsHot("shop", "k000m") })

	t.Run("default limit", func(t *testing.T) {
		p := a.list(url.Values{"app": {"shop"}})
		require.Len(t, p.HotKeys, controlplane.DefaultLimit)
		require.Equal(t, 151, p.Total)
		require.NotEmpty(t, p.NextCursor)
		require.Equal(t, "k000", p.HotKeys[0].Key)
		require.Equal(t, "k000m", p.HotKeys[1].Key, "byte order: a prefix first")
		require.Equal(t, "k001", p.HotKeys[2].Key)
		p2 := a.list(url.Values{"app": {"shop"}, "cursor": {p.NextCursor}})
		require.Len(t, p2.HotKeys, 51)
		require.Empty(t, p2.NextCursor, "the last page has no cursor")
		require.Equal(t, "k099", p2.HotKeys[0].Key)
	})
	t.Run("all apps in (app, key) order", func(t *testing.T) {
		all := a.all(url.Values{})
		require.Len(t, all, 171+int(r.partitions))
		require.Equal(t, barrierApp, all[0].App)
		require.Equal(t, "blog", all[r.partitions].App)
		require.Equal(t, "shop", all[len(all)-1].App)
	})
	t.Run("source filter", func(t *testing.T) {
		p := a.list(url.Values{"source": {"manual"}})
		require.Equal(t, 1, p.Total)
		h := p.HotKeys[0]
		require.Equal(t, "k000m", h.Key)
		require.Equal(t, hotkeys.SourceManual, h.Source)
		require.Equal(t, hotkeys.MitigationLocalCache, h.Mitigation)
		require.Equal(t, "2s", h.LocalTTL)
		require.Equal(t, "1h0m0s", h.TTL)
		p = a.list(url.Values{"source": {"detector"}, "app": {"blog"}, "limit": {"7"}})
		require.Equal(t, 20, p.Total)
		require.Len(t, p.HotKeys, 7)
		for _, h := range p.HotKeys {
			require.Equal(t, hotkeys.SourceDetector, h.Source)
			require.Equal(t, "blog", h.App)
			require.Empty(t, h.TTL)
			require.Nil(t, h.Expires)
		}
	})
	t.Run("limit 1 walks one by one", func(t *testing.T) {
		var keys []string
		q := url.Values{"app": {"blog"}, "limit": {"1"}}
		for {
			p := a.list(q)
			require.LessOrEqual(t, len(p.HotKeys), 1)
			for _, h := range p.HotKeys {
				keys = append(keys, h.Key)
			}
			if p.NextCursor == "" {
				break
			}
			q.Set("cursor", p.NextCursor)
		}
		require.Len(t, keys, 20)
		require.Equal(t, "post:19", keys[19])
	})
	t.Run("a cursor goes with any filter", func(t *testing.T) {
		p := a.list(url.Values{"app": {"shop"}, "limit": {"5"}})
		p = a.list(url.Values{"cursor": {p.NextCursor}, "limit": {"1"}})
		// k000, k000m, k001, k002, k003, then across the apps.
		require.Equal(t, "k004", p.HotKeys[0].Key)
	})
	t.Run("bad queries", func(t *testing.T) {
		for q, want := range map[string]string{
			"limit=0":             "limit \"0\": want a number from 1 to 1000",
			"limit=1001":          "from 1 to 1000",
			"limit=x":             "from 1 to 1000",
			"source=robot":        "source: want detector or manual",
			"cursor=nope":         "cursor: not one this API returned",
			"cursor=AQ":           "cursor: not one this API returned",
			"cursor=Ag":           "cursor: not one this API returned",
			"apps=shop":           `unknown query parameter "apps"`,
			"app=shop&app=blog":   `"app" is given 2 times`,
			"key_b64=aw&app=shop": `unknown query parameter "key_b64"`,
		} {
			rep := a.do("GET", "/api/hotkeys?"+q, nil)
			require.Equal(t, http.StatusBadRequest, rep.code, q)
			require.Contains(t, rep.errorText(t), want, q)
		}
	})
}

// TestListExpiresIn: expires_in is the TTL left by the server's clock.
func TestListExpiresIn(t *testing.T) {
	r := newRegistry(t, 1)
	f := r.follower()
	a := r.server(f, controlplane.Config{Token: token})
	pub := a.promote("shop", "k", controlplane.PromoteRequest{Mitigation: "coalesce", TTL: "10m"})
	testenv.Eventually(t, "the promote", func() bool { return f.IsHot("shop", "k") })
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{pub.Created.Add(4 * time.Minute), "6m0s"},
		{pub.Created.Add(10*time.Minute - 1500*time.Microsecond), "2ms"},
		{pub.Expires, "0s"},
		{pub.Expires.Add(time.Hour), "0s"},
	} {
		s, err := controlplane.NewWithClock(controlplane.Config{Follower: f, Producer: r.cl, Topic: r.topic},
			func() time.Time { return tc.at })
		require.NoError(t, err)
		rec := httpRecord(s, "GET", "/api/hotkeys?app=shop", nil, "")
		require.Equal(t, http.StatusOK, rec.Code)
		p := decode[controlplane.HotKeyPage](t, rec.Body.Bytes())
		require.Len(t, p.HotKeys, 1)
		require.Equal(t, tc.want, p.HotKeys[0].ExpiresIn)
	}
}

func TestListNotReady(t *testing.T) {
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	a := serve(t, controlplane.Config{Follower: f, Producer: unreachableProducer(t)})
	rep := a.do("GET", "/api/hotkeys", nil)
	require.Equal(t, http.StatusServiceUnavailable, rep.code)
	require.Equal(t, "1", rep.header.Get("Retry-After"))
	require.Contains(t, rep.errorText(t), "still being read")
}

// TestPaginationUnderChanges walks a list of 2,500 entries page by page
// while keys are added and removed: every entry there from start to end is
// listed exactly once, and no entry twice.
func TestPaginationUnderChanges(t *testing.T) {
	r := newRegistry(t, 3)
	f := r.follower()
	a := r.server(f, controlplane.Config{Token: token})
	const n = 2500
	initial := make(map[string]bool, n)
	var recs []*kgo.Record
	for i := range n {
		k := fmt.Sprintf("k%05d", i)
		initial[k] = true
		recs = append(recs, bulkHot("shop", k, 1))
	}
	r.produce(recs...)
	r.barrier(f)

	// The follower counts the changes it applies; the walk waits for some
	// after each page, so that every page reads a set the writer changed.
	var applied atomic.Int64
	f.OnChange(func(hotkeys.Entry) { applied.Add(1) })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var added atomic.Int64
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		var live []string
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			// New keys right after random initial ones, all over the
			// order, and some of the earlier new keys cooled.
			var batch []*kgo.Record
			for range 5 {
				k := fmt.Sprintf("k%05d+%d", rng.IntN(n), seq)
				live = append(live, k)
				batch = append(batch, bulkHot("shop", k, 2))
			}
			if len(live) > 10 {
				i := rng.IntN(len(live))
				batch = append(batch, detector(schemas.HotKeyCooled, "shop", live[i], 0), tombstone("shop", live[i]))
				live = append(live[:i], live[i+1:]...)
			}
			r.produce(batch...)
			added.Add(5)
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()

	seen := map[string]bool{}
	q := url.Values{"app": {"shop"}, "limit": {"100"}}
	last := ""
	pages := 0
	for {
		before := applied.Load()
		p := a.list(q)
		pages++
		for _, h := range p.HotKeys {
			require.False(t, seen[h.Key], "%s listed twice", h.Key)
			require.Greater(t, h.Key, last, "pages are in key order")
			seen[h.Key], last = true, h.Key
		}
		if p.NextCursor == "" {
			break
		}
		q.Set("cursor", p.NextCursor)
		testenv.Eventually(t, "the writer's changes", func() bool { return applied.Load() > before })
	}
	for k := range initial {
		require.True(t, seen[k], "%s was there throughout and not listed", k)
	}
	require.Greater(t, len(seen), n, "keys added during the walk were listed too")
	t.Logf("%d pages, %d entries listed, %d keys added meanwhile", pages, len(seen), added.Load())
}

func httpRecord(h http.Handler, method, path string, body []byte, tok string) *httpRecorder {
	rec := newRecorder()
	req := newRequest(method, path, body)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	h.ServeHTTP(rec, req)
	return rec
}
