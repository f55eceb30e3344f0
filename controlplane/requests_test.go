package controlplane_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
)

// TestBadRequests: what a mutation refuses, with a JSON error saying why;
// nothing of it reaches the registry.
func TestBadRequests(t *testing.T) {
	r := newRegistry(t, 1)
	f := r.follower()
	a := r.server(f, controlplane.Config{Token: token, MaxTTL: 2 * time.Hour})
	ok := `{"app":"shop","mitigation":"local_cache","ttl":"10m"}`
	big := `{"app":"shop","mitigation":"local_cache","ttl":"10m","reason":"` + strings.Repeat("x", controlplane.MaxBodyBytes) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"oversized body", "POST", "/api/hotkeys/k/promote", big, 413, "over 65536 bytes"},
		{"malformed JSON", "POST", "/api/hotkeys/k/promote", `{"app":"shop",`, 400, "not the JSON object"},
		{"not an object", "POST", "/api/hotkeys/k/promote", `[1]`, 400, "not the JSON object"},
		{"empty body", "POST", "/api/hotkeys/k/promote", ``, 400, "not the JSON object"},
		{"unknown field", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"split","split":4,"ttl":"1m"}`, 400, `unknown field "split"`},
		{"trailing data", "POST", "/api/hotkeys/k/promote", ok + `{}`, 400, "more after its JSON object"},
		{"wrong type", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"local_cache","ttl":600}`, 400, "not the JSON object"},
		{"no app", "POST", "/api/hotkeys/k/promote", `{"mitigation":"local_cache","ttl":"10m"}`, 400, "app is required"},
		{"app too long", "POST", "/api/hotkeys/k/promote", `{"app":"` + strings.Repeat("a", 257) + `","mitigation":"local_cache","ttl":"10m"}`, 400, "app is 257 bytes, limit 256"},
		{"no mitigation", "POST", "/api/hotkeys/k/promote", `{"app":"shop","ttl":"10m"}`, 400, "mitigation is required"},
		{"mitigation none", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"none","ttl":"10m"}`, 400, "DELETE it"},
		{"unknown mitigation", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"cache","ttl":"10m"}`, 400, `mitigation "cache"`},
		{"split without factor", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"split","ttl":"10m"}`, 400, "split_factor is 0: split needs a power of two from 2 to 1024"},
		{"split factor 3", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"split","split_factor":3,"ttl":"10m"}`, 400, "split_factor is 3"},
		{"split factor 1", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"split","split_factor":1,"ttl":"10m"}`, 400, "split_factor is 1"},
		{"split factor too big", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"split","split_factor":2048,"ttl":"10m"}`, 400, "split_factor is 2048"},
		{"split factor on local_cache", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"local_cache","split_factor":4,"ttl":"10m"}`, 400, "only split takes one"},
		{"no ttl", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"local_cache"}`, 400, "ttl is required"},
		{"ttl not a duration", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"local_cache","ttl":"600"}`, 400, `ttl "600": want a Go duration`},
		{"ttl too short", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"local_cache","ttl":"500ms"}`, 400, "ttl is 500ms: want from 1s to 2h0m0s"},
		{"ttl negative", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"local_cache","ttl":"-10m"}`, 400, "want from 1s"},
		{"ttl too long", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"local_cache","ttl":"3h"}`, 400, "want from 1s to 2h0m0s"},
		{"local_ttl on split", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"split","split_factor":2,"ttl":"1m","local_ttl":"2s"}`, 400, "local_ttl applies to mitigation local_cache only"},
		{"by too long", "POST", "/api/hotkeys/k/promote", `{"app":"shop","mitigation":"coalesce","ttl":"1m","by":"` + strings.Repeat("b", 257) + `"}`, 400, "by is 257 bytes, limit 256"},
		{"several errors at once", "POST", "/api/hotkeys/k/promote", `{"mitigation":"split"}`, 400, "app is required\nsplit_factor is 0"},
		{"query on a path key", "POST", "/api/hotkeys/k/promote?key_b64=aw", ok, 400, "the key is in the path"},
		{"unknown query", "POST", "/api/hotkeys/k/promote?ttl=1m", ok, 400, `unknown query parameter "ttl"`},
		{"no key_b64", "POST", "/api/hotkeys/promote", ok, 400, "no key"},
		{"key_b64 not base64", "POST", "/api/hotkeys/promote?key_b64=a!b", ok, 400, "key_b64 is not base64"},
		{"key_b64 with a bare +", "POST", "/api/hotkeys/promote?key_b64=a+b=", ok, 400, "%2B"},
		{"demote without ttl", "DELETE", "/api/hotkeys/k?app=shop", "", 400, "ttl is required"},
		{"demote without app", "DELETE", "/api/hotkeys/k?ttl=1m", "", 400, "app is required"},
		{"demote with mitigation", "DELETE", "/api/hotkeys/k?app=shop&ttl=1m&mitigation=split", "", 400, `unknown query parameter "mitigation"`},
		{"demote without key", "DELETE", "/api/hotkeys?app=shop&ttl=1m", "", 400, "no key"},
		{"demote key twice", "DELETE", "/api/hotkeys/k?app=shop&ttl=1m&key_b64=aw", "", 400, "the key is in the path"},
		{"unknown route", "GET", "/api/nothing", "", 404, "no such API route"},
		{"too many segments", "POST", "/api/hotkeys/a/b/promote", ok, 404, "no such API route"},
		{"promote, wrong method", "GET", "/api/hotkeys/k/promote", "", 405, "method GET is not allowed here; allowed: POST"},
		{"key, wrong method", "GET", "/api/hotkeys/k", "", 405, "allowed: DELETE"},
		{"list, wrong method", "POST", "/api/hotkeys", "", 405, "allowed: GET, HEAD, DELETE"},
		{"key named promote, wrong method", "GET", "/api/hotkeys/promote", "", 405, "allowed: DELETE, POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" || tc.method == "POST" {
				body = []byte(tc.body)
			}
			rep := a.do(tc.method, tc.path, body)
			require.Equal(t, tc.code, rep.code, "%s", rep.body)
			require.Contains(t, rep.errorText(t), tc.want)
			if tc.code == 405 {
				require.NotEmpty(t, rep.header.Get("Allow"))
			}
		})
	}
	r.barrier(f)
	require.Zero(t, f.Stats().Manual+f.Stats().Demoted, "a refused request reached the registry")
}

// TestNotAcknowledged: when Kafka does not acknowledge a change in time,
// the answer is a 503 with a JSON error, within the publish timeout or the
// request's own context, whichever ends first.
func TestNotAcknowledged(t *testing.T) {
	r := newRegistry(t, 1)
	f := r.follower()
	down := unreachableProducer(t)
	body := promoteBody(t, controlplane.PromoteRequest{App: "shop", Mitigation: "local_cache", TTL: "1m"})

	t.Run("publish timeout", func(t *testing.T) {
		a := serve(t, controlplane.Config{Follower: f, Producer: down, Topic: r.topic, Token: token, PublishTimeout: 100 * time.Millisecond})
		rep := a.do("POST", "/api/hotkeys/k/promote", body)
		require.Equal(t, http.StatusServiceUnavailable, rep.code)
		require.Contains(t, rep.errorText(t), "Kafka did not acknowledge the promote in time; it may still be written")
		rep = a.do("DELETE", "/api/hotkeys/k?app=shop&ttl=1m", nil)
		require.Equal(t, http.StatusServiceUnavailable, rep.code)
		require.Contains(t, rep.errorText(t), "did not acknowledge the demote")
	})
	t.Run("request context", func(t *testing.T) {
		// The default publish timeout (10s) is far; the request's context
		// ends first.
		s, err := controlplane.New(controlplane.Config{Follower: f, Producer: down, Topic: r.topic, Token: token})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		rec := newRecorder()
		req := newRequest("POST", "/api/hotkeys/k/promote", body).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer "+token)
		s.ServeHTTP(rec, req)
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		require.Contains(t, rec.Body.String(), "did not acknowledge")
	})
	t.Run("producer fails", func(t *testing.T) {
		closed, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...))
		require.NoError(t, err)
		closed.Close()
		a := serve(t, controlplane.Config{Follower: f, Producer: closed, Topic: r.topic, Token: token})
		rep := a.do("POST", "/api/hotkeys/k/promote", body)
		require.Equal(t, http.StatusServiceUnavailable, rep.code)
		require.Contains(t, rep.errorText(t), "Kafka did not acknowledge the promote: client closed")
	})
	r.barrier(f)
	require.Zero(t, f.Stats().Manual, "an entry not acknowledged was written")
}

// TestMetricsBounded: requests naming 10,000 distinct keys add no series;
// the labels hold route patterns, never a path.
func TestMetricsBounded(t *testing.T) {
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	reg := prometheus.NewRegistry()
	s, err := controlplane.New(controlplane.Config{Follower: f, Producer: unreachableProducer(t), Token: token, Registerer: reg})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	// Request i is of kind i%9, for a key of its own.
	request := func(i int) {
		key := "key-" + strings.Repeat("x", i%7) + "-" + strconv.Itoa(i)
		req := []struct {
			method, path, tok string
			body              []byte
		}{
			{"POST", "/api/hotkeys/" + key + "/promote", "", []byte(`{}`)},
			{"POST", "/api/hotkeys/" + key + "/promote", token, []byte(`{"app":`)},
			{"DELETE", "/api/hotkeys/" + key + "?app=shop", "wrong", nil},
			{"DELETE", "/api/hotkeys/" + key + "?app=" + key, token, nil},
			{"POST", "/api/hotkeys/promote?key_b64=" + b64(key), "", []byte(`{}`)},
			{"GET", "/api/hotkeys/" + key, "", nil},
			{"GET", "/api/hotkeys?app=" + key, "", nil},
			{"GET", "/api/" + key, "", nil},
			{"PROPFIND" + strconv.Itoa(i), "/api/hotkeys/" + key, "", nil},
		}[i%9]
		rec := httpRecord(s, req.method, req.path, req.body, req.tok)
		require.NotEqual(t, http.StatusInternalServerError, rec.Code, "%s %s", req.method, req.path)
	}
	series := func() (n int, values []string) {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			require.True(t, strings.HasPrefix(mf.GetName(), "keyheat_api_"), mf.GetName())
			for _, m := range mf.GetMetric() {
				n++
				for _, l := range m.GetLabel() {
					values = append(values, l.GetValue())
				}
			}
		}
		return n, values
	}
	for i := range 9 {
		request(i)
	}
	before, _ := series()
	require.NotZero(t, before)
	for i := range 10_000 {
		request(9 + i)
	}
	after, values := series()
	require.Equal(t, before, after, "requests with new keys added series")
	for _, v := range values {
		require.NotContains(t, v, "key-", "a key in a label value")
	}
	require.Contains(t, values, "/api/hotkeys/{key}/promote")
	require.Contains(t, values, "other", "unknown methods share one label value")

	// Close unregisters them, so a new server can register again.
	s.Close()
	s.Close()
	s2, err := controlplane.New(controlplane.Config{Follower: f, Producer: unreachableProducer(t), Registerer: reg})
	require.NoError(t, err)
	s2.Close()
}
