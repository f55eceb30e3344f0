package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The hot product the load plants, and the Redis key of its record.
const (
	hotID    = "7"
	hotKey   = "product:" + hotID
	hotViews = "views:product:" + hotID // its view counter, hot for writes
)

// TestHotProductLoop runs the whole loop as separate processes on the
// real broker and private Redis servers: the shop reports its accesses,
// detect (live) finds the planted product hot and writes the registry,
// the shop follows the registry and serves the product from its cache,
// so Redis stops seeing its reads; its view counter, hot for writes, is
// split. When the burst ends the product cools in the registry and
// leaves the shop's cache, and the counter's shards are folded back.
//
// A second shop, with --local-cache=false and its own Redis, takes the
// same load: it is the comparison the test's log reports the Redis read
// ratio against.
func TestHotProductLoop(t *testing.T) {
	seeds := testenv.KafkaSeeds(t)
	cachedRDB := testenv.PrivateRedisCluster(t)
	cachedRedis := cachedRDB.Options().Addrs[0]
	plainRedis := testenv.PrivateRedisCluster(t).Options().Addrs[0]
	for _, bin := range []string{"shop", "load", "detect"} {
		binary(t, bin)
	}

	events := testenv.NewTopic(t, seeds, 4)
	invalidations := testenv.NewTopic(t, seeds, 1)
	registry := privateTopics(t, seeds, "hot", "dlq", "win", "rep", "prog")
	d := start(t, "detect", "run", "--print=text",
		"--kafka.brokers="+strings.Join(seeds, ","), "--kafka.partitions=4",
		"--kafka.topics.events="+events, "--kafka.topics.hotkeys="+registry["hot"], "--kafka.topics.dlq="+registry["dlq"],
		"--kafka.topics.windows="+registry["win"], "--kafka.topics.reports="+registry["rep"], "--kafka.topics.progress="+registry["prog"],
		"--detect.group="+testenv.UniqueName(t, "g"), "--detect.merge_group="+testenv.UniqueName(t, "m"),
		"--detect.commit_interval=100ms", "--detect.session_timeout=6s",
		// Keys read or written more than 10 times a second are hot. The
		// load sends the planted product some 35 reads and 15 views a
		// second per shop, and the busiest background product about one.
		`--pipeline.rules=[{name: shop, app: shop, key: "*", window: 2s, rate: 10}]`,
		"--pipeline.detect.cool_down=2s", "--pipeline.idle_timeout=1s")
	d.WaitStderr(`msg="partitions assigned"`)

	shopArgs := func(redisAddr string, extra ...string) []string {
		return append([]string{"--addr=127.0.0.1:0", "--app=shop", "--kafka=" + strings.Join(seeds, ","),
			"--redis=" + redisAddr, "--redis-cluster", "--seed=2000",
			"--registry-topic=" + registry["hot"], "--events-topic=" + events, "--invalidation-topic=" + invalidations}, extra...)
	}
	cached := start(t, "shop", shopArgs(cachedRedis)...)
	plain := start(t, "shop", shopArgs(plainRedis, "--local-cache=false")...)
	serving := regexp.MustCompile(`msg=serving addr=(\S+)`)
	cachedURL := "http://" + serving.FindStringSubmatch(cached.WaitStderr(serving.String()))[1]
	plainURL := "http://" + serving.FindStringSubmatch(plain.WaitStderr(serving.String()))[1]
	for _, p := range []*testenv.Process{cached, plain} {
		read := p.Stderr.Index(regexp.MustCompile(`msg="registry read"`))
		require.True(t, read >= 0 && read < p.Stderr.Index(regexp.MustCompile(`msg=serving`)), "the shop reads the registry before it serves")
	}

	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	cachedGets := countGets(t, cachedRedis, hotKey)
	plainGets := countGets(t, plainRedis, hotKey)
	cachedBefore, plainBefore := cachedGets.sync(), plainGets.sync()

	// The same planted burst on both shops: identical request sequences.
	loadArgs := func(url string) []string {
		return []string{"--url=" + url, "--products=2000", "--zipf=0.6", "--hot=" + hotID, "--hot-share=0.5",
			"--views=0.3", "--rate=100", "--workers=8", "--duration=0", "--report-every=0", "--seed=1"}
	}
	cachedLoad := start(t, "load", loadArgs(cachedURL)...)
	plainLoad := start(t, "load", loadArgs(plainURL)...)

	// Detect finds the product hot from the shops' own reports; the
	// cached shop then holds it and serves it from memory.
	var dv debugView
	testenv.Eventually(t, "the hot product held in the shop's cache and served from it, its views split", func() bool {
		dv = getDebug(t, hc, cachedURL)
		k, ok := dv.cacheKey(hotKey)
		return dv.isHot(hotKey) && ok && k.Cached && k.Hits > 0 && dv.isHot(hotViews)
	})
	require.Equal(t, hotkeys.MitigationLocalCache, dv.hot(hotKey).Mitigation)
	require.Equal(t, hotkeys.MitigationSplit, dv.hot(hotViews).Mitigation)
	require.GreaterOrEqual(t, dv.hot(hotViews).SplitFactor, 2)
	testenv.Eventually(t, "the shop's splitter spreading the hot views, as its stats say", func() bool {
		dv = getDebug(t, hc, cachedURL)
		k, ok := dv.splitKey(hotViews)
		return ok && k.Shards >= 2 && k.Writes > 0
	})
	require.Positive(t, dv.Split.Incr.Split, "split increments counted")

	// Redis no longer sees the product's reads from the cached shop: n
	// requests make fewer than n/2 GETs (one per --local-ttl, at most a
	// couple here), where the shop without the cache makes one each.
	const n = 50
	c0, p0 := cachedGets.sync(), plainGets.sync()
	for range n {
		require.Contains(t, get(t, hc, cachedURL+"/products/"+hotID, http.StatusOK), `"id":"`+hotID+`"`)
		require.Contains(t, get(t, hc, plainURL+"/products/"+hotID, http.StatusOK), `"id":"`+hotID+`"`)
	}
	c1, p1 := cachedGets.sync(), plainGets.sync()
	require.Less(t, c1-c0, int64(n/2), "Redis GETs of %s for %d requests to the cached shop", hotKey, n)
	require.GreaterOrEqual(t, p1-p0, int64(n), "Redis GETs of %s for %d requests to the shop without cache", hotKey, n)
	t.Logf("%d requests of the hot product, while hot: %d Redis GETs with the cache, %d without", n, c1-c0, p1-p0)

	// A write reaches readers at once, though the product is cached.
	put(t, hc, cachedURL+"/products/"+hotID, `{"id":"7","name":"renamed"}`)
	require.Equal(t, `{"id":"7","name":"renamed"}`, get(t, hc, cachedURL+"/products/"+hotID, http.StatusOK))
	require.EqualValues(t, 1, getDebug(t, hc, cachedURL).Cache.InvalidationsSent)
	// Views count through the splitter (a product the load never touches).
	for range 3 {
		post(t, hc, cachedURL+"/products/e2e/view")
	}
	require.JSONEq(t, `{"id":"e2e","views":3}`, get(t, hc, cachedURL+"/products/e2e/views", http.StatusOK))

	// The burst goes on for a while, so that the read counts below are
	// mostly of the product while hot (the load reads it some 35 times a
	// second per shop).
	testenv.Eventually(t, "a thousand reads served from the cache", func() bool { return getDebug(t, hc, cachedURL).Cache.Hits >= 1000 })

	// The burst ends.
	cachedLoad.Signal(syscall.SIGINT)
	plainLoad.Signal(syscall.SIGINT)
	require.Equal(t, 0, cachedLoad.WaitExit())
	require.Equal(t, 0, plainLoad.WaitExit())
	cachedRun, plainRun := parseLoad(t, cachedLoad), parseLoad(t, plainLoad)
	for _, r := range []loadRun{cachedRun, plainRun} {
		for code := range r.status {
			require.False(t, code == "error" || code >= "500", "no request failed on the shops' side: %s", r.line)
		}
	}
	cachedTotal, plainTotal := cachedGets.sync()-cachedBefore, plainGets.sync()-plainBefore
	t.Logf("load on the cached shop: %s", cachedRun.line)
	t.Logf("load on the shop without cache: %s", plainRun.line)
	// The test read the product n times from each shop, and once more
	// from the cached one after its write.
	cachedReads, plainReads := cachedRun.hotReads+n+1, plainRun.hotReads+n
	t.Logf("Redis GETs of %s during the burst: with the cache %d for %d reads (%.1f%%), without %d for %d reads (%.1f%%): %.1fx fewer",
		hotKey, cachedTotal, cachedReads, 100*float64(cachedTotal)/float64(cachedReads), plainTotal, plainReads,
		100*float64(plainTotal)/float64(plainReads), float64(plainTotal)/float64(max(cachedTotal, 1)))

	// The product cools in the registry, and the shop's cache lets it go
	// (nothing reads it any more: the registry's change drops it). Its
	// view counter cools too, and its shards are folded into the key.
	testenv.Eventually(t, "the cooled product gone from the registry and the cache", func() bool {
		dv = getDebug(t, hc, cachedURL)
		_, held := dv.cacheKey(hotKey)
		return !dv.isHot(hotKey) && !held && !dv.isHot(hotViews)
	})
	cached.WaitStderr(`msg="folded a split key" component=splitter app=shop .* shards_folded=[1-9]`)
	require.Empty(t, scanKeys(t, cachedRDB, "{hk:*}s:"+hotViews), "shards left after the fold")
	folded, err := cachedRDB.Get(t.Context(), hotViews).Int64()
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"id":%q,"views":%d}`, hotID, folded), get(t, hc, cachedURL+"/products/"+hotID+"/views", http.StatusOK),
		"the counter's key holds every view")
	var types []string
	for _, r := range testenv.ReadCommitted(t, seeds, registry["hot"]) {
		if r.Value == nil {
			continue // a tombstone after a cooled
		}
		h, err := schemas.DecodeHotKeyEvent(r.Value)
		require.NoError(t, err)
		if h.App == "shop" && h.Key == hotKey {
			types = append(types, h.Type)
		}
	}
	require.Contains(t, types, schemas.HotKeyHot)
	require.Equal(t, schemas.HotKeyCooled, types[len(types)-1], "the registry's last word on %s: %v", hotKey, types)

	// A stop drains and flushes what the reporter holds.
	for _, p := range []*testenv.Process{cached, plain} {
		p.Signal(syscall.SIGTERM)
		require.Equal(t, 0, p.WaitExit())
		p.WaitStderr(`msg="reporter closed" recorded=\d+ sent=\d+ failed=0 `)
		p.WaitStderr(`msg="shop stopped"`)
		require.Empty(t, p.Stderr.Match(regexp.MustCompile(`level=ERROR`)))
	}
	d.Signal(syscall.SIGTERM)
	d.WaitExit()
}

// scanKeys returns the keys matching the glob pattern on every master.
func scanKeys(t *testing.T, rdb *redis.ClusterClient, pattern string) []string {
	t.Helper()
	var mu sync.Mutex
	var out []string
	require.NoError(t, rdb.ForEachMaster(t.Context(), func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, pattern).Result()
		mu.Lock()
		out = append(out, keys...)
		mu.Unlock()
		return err
	}))
	return out
}

// privateTopics returns a name unique to the test for each of names, and
// deletes those topics (made by the processes) when the test ends.
func privateTopics(t *testing.T, seeds []string, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var all []string
	for _, n := range names {
		out[n] = testenv.UniqueName(t, n)
		all = append(all, out[n])
	}
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, all...)
	})
	return out
}

// debugView is /debug/hotkeys.
type debugView struct {
	Hot   []debugEntry        `json:"hot"`
	Cache *hotkeys.CacheStats `json:"cache"`
	Split hotkeys.SplitStats  `json:"split"`
}

func (v debugView) splitKey(key string) (hotkeys.SplitKeyStats, bool) {
	i := slices.IndexFunc(v.Split.Keys, func(k hotkeys.SplitKeyStats) bool { return k.Key == key })
	if i < 0 {
		return hotkeys.SplitKeyStats{}, false
	}
	return v.Split.Keys[i], true
}

func (v debugView) hot(key string) debugEntry {
	i := slices.IndexFunc(v.Hot, func(e debugEntry) bool { return e.Key == key })
	if i < 0 {
		return debugEntry{}
	}
	return v.Hot[i]
}

func (v debugView) isHot(key string) bool { return v.hot(key).Key == key }

func (v debugView) cacheKey(key string) (hotkeys.KeyStats, bool) {
	if v.Cache == nil {
		return hotkeys.KeyStats{}, false
	}
	i := slices.IndexFunc(v.Cache.Keys, func(k hotkeys.KeyStats) bool { return k.Key == key })
	if i < 0 {
		return hotkeys.KeyStats{}, false
	}
	return v.Cache.Keys[i], true
}

func getDebug(t *testing.T, hc *http.Client, url string) debugView {
	t.Helper()
	var v debugView
	require.NoError(t, json.Unmarshal([]byte(get(t, hc, url+"/debug/hotkeys", http.StatusOK)), &v))
	return v
}

// loadRun is the summary line a load process printed.
type loadRun struct {
	line     string
	status   map[string]int64 // "200", "404", "error" (no answer)
	hotReads int64
}

var loadDone = regexp.MustCompile(`^done: requests=\d+ .* hot_reads=(\d+) status: (.*)$`)

func parseLoad(t *testing.T, p *testenv.Process) loadRun {
	t.Helper()
	m := p.Stdout.Match(loadDone)
	require.Len(t, m, 1, "the load's summary")
	sub := loadDone.FindStringSubmatch(m[0])
	r := loadRun{line: m[0], status: map[string]int64{}}
	var err error
	r.hotReads, err = strconv.ParseInt(sub[1], 10, 64)
	require.NoError(t, err)
	for f := range strings.FieldsSeq(sub[2]) {
		code, count, ok := strings.Cut(f, "=")
		require.True(t, ok, "status %q", f)
		r.status[code], err = strconv.ParseInt(count, 10, 64)
		require.NoError(t, err)
	}
	return r
}

func get(t *testing.T, hc *http.Client, url string, want int) string {
	t.Helper()
	return do(t, hc, http.MethodGet, url, "", want)
}

func put(t *testing.T, hc *http.Client, url, body string) {
	t.Helper()
	do(t, hc, http.MethodPut, url, body, http.StatusNoContent)
}

func post(t *testing.T, hc *http.Client, url string) {
	t.Helper()
	do(t, hc, http.MethodPost, url, "", http.StatusNoContent)
}

func do(t *testing.T, hc *http.Client, method, url, body string, want int) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, want, resp.StatusCode, "%s %s: %s", method, url, b)
	return string(b)
}
