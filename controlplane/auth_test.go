package controlplane_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/internal/testenv"
)

func TestAuth(t *testing.T) {
	r := newRegistry(t, 1)
	f := r.follower()
	open := r.server(f, controlplane.Config{})
	guarded := r.server(f, controlplane.Config{Token: token})
	reads := r.server(f, controlplane.Config{Token: token, ProtectReads: true})
	body := promoteBody(t, controlplane.PromoteRequest{App: "shop", Mitigation: "local_cache", TTL: "1m"})

	t.Run("no token configured: changes refused", func(t *testing.T) {
		for _, tok := range []string{"", token} {
			for _, req := range []struct{ method, path string }{
				{"POST", "/api/hotkeys/k/promote"}, {"POST", "/api/hotkeys/promote?key_b64=aw"},
				{"DELETE", "/api/hotkeys/k?app=shop&ttl=1m"}, {"DELETE", "/api/hotkeys?key_b64=aw&app=shop&ttl=1m"},
			} {
				rep := open.doAuth(req.method, req.path, body, tok)
				require.Equal(t, http.StatusForbidden, rep.code, "%s %s", req.method, req.path)
				msg := rep.errorText(t)
				require.Contains(t, msg, "api.token")
				require.Contains(t, msg, "api.token_file")
			}
		}
		require.Equal(t, http.StatusOK, open.doAuth("GET", "/api/hotkeys", nil, "").code, "reads are open")
	})

	t.Run("missing or wrong token: 401", func(t *testing.T) {
		for _, tc := range []struct{ name, header, wantAuth string }{
			{"missing", "", `Bearer realm="keyheat"`},
			{"wrong", "Bearer nope", `Bearer realm="keyheat", error="invalid_token"`},
			{"token's prefix", "Bearer " + token[:len(token)-1], `Bearer realm="keyheat", error="invalid_token"`},
			{"token with more", "Bearer " + token + "x", `Bearer realm="keyheat", error="invalid_token"`},
			{"basic scheme", "Basic " + token, `Bearer realm="keyheat"`},
			{"scheme only", "Bearer", `Bearer realm="keyheat"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, req := range []struct{ method, path string }{
					{"POST", "/api/hotkeys/k/promote"}, {"DELETE", "/api/hotkeys/k?app=shop&ttl=1m"},
				} {
					rep := rawRequest(t, guarded.base, req.method, req.path, body, tc.header)
					require.Equal(t, http.StatusUnauthorized, rep.code)
					require.Equal(t, tc.wantAuth, rep.header.Get("WWW-Authenticate"))
					require.NotContains(t, string(rep.body), token)
					rep.errorText(t)
				}
			})
		}
	})

	t.Run("right token", func(t *testing.T) {
		// The scheme's case does not matter (RFC 7235).
		rep := rawRequest(t, guarded.base, "POST", "/api/hotkeys/k/promote", body, "bearer "+token)
		require.Equal(t, http.StatusCreated, rep.code, "%s", rep.body)
		require.Equal(t, http.StatusOK, guarded.doAuth("DELETE", "/api/hotkeys/k?app=shop&ttl=1m", nil, token).code)
		require.Equal(t, http.StatusOK, guarded.doAuth("GET", "/api/hotkeys", nil, "").code, "reads are open")
	})

	t.Run("protected reads", func(t *testing.T) {
		rep := reads.doAuth("GET", "/api/hotkeys", nil, "")
		require.Equal(t, http.StatusUnauthorized, rep.code)
		require.Equal(t, `Bearer realm="keyheat"`, rep.header.Get("WWW-Authenticate"))
		require.Equal(t, http.StatusUnauthorized, reads.doAuth("GET", "/api/hotkeys", nil, "nope").code)
		require.Equal(t, http.StatusOK, reads.doAuth("GET", "/api/hotkeys", nil, token).code)
	})
}

// rawRequest sends a request with the Authorization header as given.
func rawRequest(t *testing.T, base, method, path string, body []byte, authorization string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, bytes.NewReader(body))
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(t, err)
	return reply{code: resp.StatusCode, header: resp.Header, body: b.Bytes()}
}

// TestLogsCarryNoSecrets runs every kind of request against a server
// logging at debug level, then looks for the token and the raw key in
// what it logged.
func TestLogsCarryNoSecrets(t *testing.T) {
	r := newRegistry(t, 1)
	f := r.follower()
	var logs testenv.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := r.server(f, controlplane.Config{Token: token, ProtectReads: true, Logger: log})
	const key = "customer:secret-key-7f3a"
	// A server whose producer cannot reach Kafka logs its failures.
	down := serve(t, controlplane.Config{Follower: f, Producer: unreachableProducer(t), Topic: r.topic, Token: token,
		Logger: log, PublishTimeout: 200 * time.Millisecond})

	a.promote("shop", key, controlplane.PromoteRequest{Mitigation: "split", SplitFactor: 4, TTL: "1m", By: "alice"})
	a.demote("shop", key, "1m")
	a.list(url.Values{"app": {"shop"}})
	a.doAuth("POST", "/api/hotkeys/"+key+"/promote", []byte(`{}`), "")
	a.doAuth("POST", "/api/hotkeys/"+key+"/promote", []byte(`{}`), token+"x")
	a.doAuth("GET", "/api/hotkeys", nil, "wrong")
	a.do("POST", "/api/hotkeys/"+key+"/promote", []byte(`{"app":`))
	rep := down.do("POST", "/api/hotkeys/"+key+"/promote",
		promoteBody(t, controlplane.PromoteRequest{App: "shop", Mitigation: "coalesce", TTL: "1m"}))
	require.Equal(t, http.StatusServiceUnavailable, rep.code, "%s", rep.body)

	out := logs.String()
	require.NotContains(t, out, token)
	require.NotContains(t, out, key)
	require.Contains(t, out, hexHash(key), "the logs name the key by its hash")
	require.Contains(t, out, "wrong bearer token", "the auth failures are logged")
	require.Contains(t, out, "publish a manual entry", "the failed publish is logged")
}

func hexHash(key string) string {
	const digits = "0123456789abcdef"
	h := xxh3.HashString(key)
	b := make([]byte, 16)
	for i := range b {
		b[i] = digits[(h>>(60-4*i))&0xf]
	}
	return string(b)
}
