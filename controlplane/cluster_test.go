package controlplane_test

import (
	"net/url"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestPromoteAcrossServers: two servers on two followers of one registry,
// and a third follower standing for an application. A change made through
// either server reaches all of them through Kafka alone.
func TestPromoteAcrossServers(t *testing.T) {
	t.Run("kfake", func(t *testing.T) { testPromoteAcross(t, newRegistry(t, 3)) })
	t.Run("real_kafka", func(t *testing.T) { testPromoteAcross(t, openRegistry(t, testenv.KafkaSeeds(t), 3)) })
}

func testPromoteAcross(t *testing.T, r *registry) {
	fa, fb, app := r.follower(), r.follower(), r.follower()
	a := r.server(fa, controlplane.Config{Token: token})
	b := r.server(fb, controlplane.Config{Token: token})

	// Promote on A: B lists it and the application sees it hot.
	pub := a.promote("shop", "product:42", controlplane.PromoteRequest{Mitigation: "split", SplitFactor: 8, TTL: "10m",
		By: "alice", Reason: "flash sale"})
	require.Equal(t, schemas.ManualPromote, pub.Action)
	require.Equal(t, "product:42", pub.Key)
	require.Nil(t, pub.KeyB64)
	require.Equal(t, hexHash("product:42"), pub.KeyHash)
	require.Equal(t, "split", pub.Mitigation)
	require.Equal(t, 8, pub.SplitFactor)
	require.Equal(t, "10m0s", pub.TTL)
	require.Equal(t, 10*time.Minute, pub.Expires.Sub(pub.Created))
	require.Equal(t, "alice", pub.By)
	require.Equal(t, r.topic, pub.Topic)
	require.GreaterOrEqual(t, pub.Offset, int64(0))

	testenv.Eventually(t, "the application's follower sees the promote", func() bool { return app.IsHot("shop", "product:42") })
	e, _ := app.Get("shop", "product:42")
	require.Equal(t, hotkeys.SourceManual, e.Source)
	require.Equal(t, hotkeys.MitigationSplit, e.Mitigation)
	require.Equal(t, 8, e.SplitFactor)
	require.Equal(t, 10*time.Minute, e.TTL)
	require.True(t, e.Expires.Equal(pub.Expires), "follower %v, API %v", e.Expires, pub.Expires)

	var h controlplane.HotKey
	testenv.Eventually(t, "B lists the promote", func() bool {
		var ok bool
		h, ok = b.listed("shop", "product:42")
		return ok
	})
	require.Equal(t, "product:42", h.Key)
	require.Equal(t, hexHash("product:42"), h.KeyHash)
	require.Equal(t, hotkeys.SourceManual, h.Source)
	require.Equal(t, hotkeys.MitigationSplit, h.Mitigation)
	require.Equal(t, 8, h.SplitFactor)
	require.Equal(t, "10m0s", h.TTL)
	require.NotNil(t, h.Expires)
	require.True(t, h.Expires.Equal(pub.Expires))
	left, err := time.ParseDuration(h.ExpiresIn)
	require.NoError(t, err)
	require.True(t, left > 0 && left <= 10*time.Minute, "expires_in %s", h.ExpiresIn)

	// A key the detector found hot, demoted on B, is gone everywhere, and
	// the detector's refreshes do not bring it back while the demote lasts.
	r.produce(detector(schemas.HotKeyHot, "shop", "product:7", 5000))
	testenv.Eventually(t, "A lists the detector's key", func() bool {
		h, ok := a.listed("shop", "product:7")
		return ok && h.Source == hotkeys.SourceDetector && h.Rate == 5000 && h.TTL == "" && h.Expires == nil
	})
	dem := b.demote("shop", "product:7", "10m")
	require.Equal(t, schemas.ManualDemote, dem.Action)
	require.Empty(t, dem.Mitigation)
	gone(t, "product:7", app, a, b)
	r.produce(detector(schemas.HotKeyUpdate, "shop", "product:7", 9000))
	r.barrier(fa, fb, app)
	require.False(t, app.IsHot("shop", "product:7"), "a detector update undid a demote")
	_, listed := a.listed("shop", "product:7")
	require.False(t, listed, "a detector update undid a demote")

	// DELETE on A of the key promoted on A: gone everywhere.
	a.demote("shop", "product:42", "10m")
	gone(t, "product:42", app, a, b)
}

// gone waits until key of app "shop" is neither hot for f nor listed by
// any of apis.
func gone(t *testing.T, key string, f *hotkeys.Follower, apis ...*api) {
	t.Helper()
	testenv.Eventually(t, "the key leaves the application's set", func() bool { return !f.IsHot("shop", key) })
	for _, a := range apis {
		testenv.Eventually(t, "the key leaves the list", func() bool {
			_, ok := a.listed("shop", key)
			return !ok
		})
	}
}

// TestPromoteOutlivesCooled: a promote keeps a key hot when the detector
// says it cooled, until the promote's TTL ends; then the detector's state
// (cooled) rules again.
//
// The follower ends the promote by the wall clock, so the test cannot stop
// time: if the machine is so slow that the TTL ran out before the check
// that the key is still hot, the check says nothing, and the test tries
// again with a TTL twice as long.
func TestPromoteOutlivesCooled(t *testing.T) {
	r := newRegistry(t, 1)
	fa, fb, app := r.follower(), r.follower(), r.follower()
	a := r.server(fa, controlplane.Config{Token: token})
	b := r.server(fb, controlplane.Config{Token: token})
	ttl := 2 * time.Second
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 6, "the machine never got to check within a TTL of %v", ttl/2)
		key := "product:" + string(rune('a'+attempt))
		r.produce(detector(schemas.HotKeyHot, "shop", key, 5000))
		testenv.Eventually(t, "the detector's entry", func() bool {
			e, ok := app.Get("shop", key)
			return ok && e.Source == hotkeys.SourceDetector
		})
		pub := a.promote("shop", key, controlplane.PromoteRequest{Mitigation: "coalesce", TTL: ttl.String()})
		testenv.Eventually(t, "the promote", func() bool {
			e, ok := app.Get("shop", key)
			return ok && e.Source == hotkeys.SourceManual
		})
		r.produce(detector(schemas.HotKeyCooled, "shop", key, 10), tombstone("shop", key))
		r.barrier(fa, fb, app)
		hot := app.IsHot("shop", key)
		h, listed := b.listed("shop", key)
		checked := time.Now()
		if !hot || !listed {
			require.False(t, checked.Before(pub.Expires), "the detector's cooled ended the promote before its TTL")
			ttl *= 2
			t.Logf("the TTL ran out before the check; again with %v", ttl)
			continue
		}
		require.Equal(t, hotkeys.SourceManual, h.Source)
		require.Equal(t, hotkeys.MitigationCoalesce, h.Mitigation)
		gone(t, key, app, a, b)
		require.False(t, time.Now().Before(pub.Expires), "the promote ended before its TTL")
		return
	}
}

// tombstone is the record detect writes after a cooled.
func tombstone(app, key string) *kgo.Record {
	return &kgo.Record{Key: schemas.HotKeyRecordKey(app, key)}
}

// TestKeysRoundTrip: keys of any bytes go through promote, list and
// demote, in the path and as key_b64.
func TestKeysRoundTrip(t *testing.T) {
	r := newRegistry(t, 1)
	fa, fb, app := r.follower(), r.follower(), r.follower()
	a := r.server(fa, controlplane.Config{Token: token})
	b := r.server(fb, controlplane.Config{Token: token})
	long := make([]byte, schemas.DefaultMaxKeyBytes)
	for i := range long {
		long[i] = "abc/%. é"[i%8]
	}
	keys := map[string]string{
		"space":      "with space",
		"slashes":    "a/b/c/",
		"leading /":  "/root",
		"percent":    "100%",
		"escaped":    "%2F%25",
		"utf8":       "ünïcødé 日本語 🔥",
		"1KiB":       string(long),
		"not utf8":   "bin\xff\xfe\x00\x80",
		"dot":        ".",
		"dotdot":     "..",
		"query-ish":  "?q=1&r#frag",
		"plus":       "a+b",
		"controls":   "tab\tline\nnul\x00",
		"promote":    "promote",
		"backslash":  `c:\dir`,
		"only slash": "/",
	}
	for name, key := range keys {
		t.Run(name, func(t *testing.T) {
			for _, form := range []string{"path", "b64"} {
				appName := "rt-" + form
				promotePath := "/api/hotkeys/" + keyPath(key) + "/promote"
				demotePath := "/api/hotkeys/" + keyPath(key) + "?"
				if form == "b64" {
					promotePath = "/api/hotkeys/promote?" + url.Values{"key_b64": {b64(key)}}.Encode()
					demotePath = "/api/hotkeys?" + url.Values{"key_b64": {b64(key)}}.Encode() + "&"
				}
				rep := a.do("POST", promotePath, promoteBody(t, controlplane.PromoteRequest{App: appName, Mitigation: "local_cache", TTL: "10m"}))
				require.Equal(t, 201, rep.code, "%s promote: %s", form, rep.body)
				pub := decode[controlplane.Published](t, rep.body)
				require.Equal(t, key, keyOf(t, controlplane.HotKey{Key: pub.Key, KeyB64: pub.KeyB64}))
				testenv.Eventually(t, "the application sees the key", func() bool { return app.IsHot(appName, key) })
				var h controlplane.HotKey
				testenv.Eventually(t, "B lists the key", func() bool {
					var ok bool
					h, ok = b.listed(appName, key)
					return ok
				})
				require.Equal(t, hexHash(key), h.KeyHash)
				if utf8.ValidString(key) {
					require.Nil(t, h.KeyB64, "key_b64 is for keys that are not UTF-8")
					require.Equal(t, key, h.Key)
				} else {
					require.Equal(t, []byte(key), h.KeyB64)
				}
				rep = b.do("DELETE", demotePath+url.Values{"app": {appName}, "ttl": {"10m"}}.Encode(), nil)
				require.Equal(t, 200, rep.code, "%s demote: %s", form, rep.body)
				testenv.Eventually(t, "the key leaves the application's set", func() bool { return !app.IsHot(appName, key) })
				testenv.Eventually(t, "the key leaves A's list", func() bool {
					_, ok := a.listed(appName, key)
					return !ok
				})
			}
		})
	}
	t.Run("too long", func(t *testing.T) {
		key := string(long) + "x"
		body := promoteBody(t, controlplane.PromoteRequest{App: "shop", Mitigation: "local_cache", TTL: "10m"})
		for _, path := range []string{"/api/hotkeys/" + keyPath(key) + "/promote", "/api/hotkeys/promote?key_b64=" + url.QueryEscape(b64(key))} {
			rep := a.do("POST", path, body)
			require.Equal(t, 400, rep.code)
			require.Contains(t, rep.errorText(t), "key is 1025 bytes, limit 1024")
		}
	})
}
