package main

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestAPITwoInstances: two detect instances of one group serve the API.
// A promote through one is listed by the other and makes IsHot true in an
// application's follower; a demote through the other takes the key out
// everywhere; a manual entry outlives a detector's cooled record of its
// key. Keys with spaces, slashes, '%', UTF-8 and non-UTF-8 bytes, up to 1
// KiB, go through both. How long a change took to be seen is logged, not
// asserted.
func TestAPITwoInstances(t *testing.T) {
	seeds := testenv.KFake(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 2))
	const token = "two-instances-token"
	var bases []string
	for range 2 {
		addr := testenv.FreeAddr(t)
		start(t, []string{"KEYHEAT_API_TOKEN=" + token}, append([]string{"run", sinkRules, "--api.addr=" + addr}, e.flags()...)...)
		bases = append(bases, "http://"+addr+"/")
	}
	for _, b := range bases {
		testenv.Eventually(t, "the API of "+b, func() bool {
			code, _ := apiCall(t, "GET", b+"api/hotkeys", "", nil)
			return code == http.StatusOK
		})
	}
	app, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Topic: e.hotkeys})
	require.NoError(t, err)
	t.Cleanup(app.Close)
	require.NoError(t, app.WaitReady(ctx(t)))

	long := make([]byte, 1024)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	keys := []string{"user 42/cart%20x é", "\xff\xfebin\x00", string(long)}
	for i, key := range keys {
		a, b := bases[i%2], bases[(i+1)%2]
		t0 := time.Now()
		code, body := apiCall(t, "POST", a+"api/hotkeys/promote?key_b64="+url.QueryEscape(b64(key)), token,
			map[string]any{"app": "shop", "mitigation": "local_cache", "ttl": "10m"})
		require.Equal(t, http.StatusCreated, code, "%s", body)
		acked := time.Since(t0)
		testenv.Eventually(t, "the client sees the promote", func() bool { return app.IsHot("shop", key) })
		seen := time.Since(t0)
		testenv.Eventually(t, "the other instance lists it", func() bool { return listed(t, b, "shop", key) == "manual" })
		t.Logf("key of %d bytes: acknowledged after %s, IsHot in a client after %s, listed by the other instance after %s",
			len(key), acked.Round(time.Microsecond), seen.Round(time.Microsecond), time.Since(t0).Round(time.Microsecond))
	}

	// The detector cools one of them: the manual entry rules until its TTL.
	h := schemas.HotKeyEvent{Version: schemas.HotKeyVersion, Type: schemas.HotKeyCooled, App: "shop", Key: keys[0], Rule: "t",
		ID: "cooled-by-test", OnsetMs: time.Now().UnixMilli(), DetectedMs: time.Now().UnixMilli()}
	v, err := h.AppendJSON(nil)
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(e.hotkeys))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx(t), &kgo.Record{Key: schemas.HotKeyRecordKey("shop", keys[0]), Value: v}).FirstErr())
	// A later promote through the same path shows the cooled was read.
	code, body := apiCall(t, "POST", bases[0]+"api/hotkeys/marker/promote", token, map[string]any{"app": "shop", "mitigation": "split", "split_factor": 2, "ttl": "1m"})
	require.Equal(t, http.StatusCreated, code, "%s", body)
	testenv.Eventually(t, "the marker", func() bool { return app.IsHot("shop", "marker") })
	require.True(t, app.IsHot("shop", keys[0]), "a detector's cooled ended a manual promote")
	for _, b := range bases {
		require.Equal(t, "manual", listed(t, b, "shop", keys[0]), b)
	}

	// Demoted through the other instance: gone everywhere.
	for i, key := range keys {
		code, body := apiCall(t, "DELETE", bases[(i+1)%2]+"api/hotkeys?key_b64="+url.QueryEscape(b64(key))+"&app=shop&ttl=10m", token, nil)
		require.Equal(t, http.StatusOK, code, "%s", body)
		testenv.Eventually(t, "the demote in the client", func() bool { return !app.IsHot("shop", key) })
		for _, b := range bases {
			testenv.Eventually(t, "the demote on "+b, func() bool { return listed(t, b, "shop", key) == "" })
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
