package controlplane_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
)

// plainServer is a server whose follower and producer reach no broker:
// enough for what is answered before Kafka matters.
func plainServer(t *testing.T) *controlplane.Server {
	t.Helper()
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(testenv.FreeAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	s, err := controlplane.New(controlplane.Config{Follower: f, Producer: unreachableProducer(t), Token: token})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// TestWrongMethodOnKeyPath: a method a key's path does not take is a
// 405 with Allow, also where a catch-all route for the key path matches
// first (DELETE on a promote path, POST on a key path).
func TestWrongMethodOnKeyPath(t *testing.T) {
	s := plainServer(t)
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/api/hotkeys/k/promote", "POST"}, // as promised
		{"PUT", "/api/hotkeys/k", "DELETE"},       // as promised
		{"DELETE", "/api/hotkeys/k/promote", "POST"},
		{"POST", "/api/hotkeys/k", "DELETE"},
		{"POST", "/api/hotkeys/a%2Fb", "DELETE"},
	} {
		rec := httpRecord(s, tc.method, tc.path, nil, token)
		if !(rec.Code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == tc.allow) {
			t.Errorf("%s %s: %d %s, Allow %q; want 405 with Allow %q", tc.method, tc.path, rec.Code,
				rec.Body.Bytes(), rec.Header().Get("Allow"), tc.allow)
		}
	}
}

// TestEveryAnswerJSON: served alone, every answer is JSON: a path outside
// /api/ is a JSON 404, and paths a ServeMux would clean or extend with a
// text/html redirect (a doubled slash, a "." segment, "/api" without its
// slash) are JSON errors.
func TestEveryAnswerJSON(t *testing.T) {
	s := plainServer(t)
	for _, path := range []string{"/", "/metrics", "/api", "//api/hotkeys", "/api/./hotkeys", "/api/hotkeys/x/../y/promote"} {
		rec := httpRecord(s, "GET", path, nil, "")
		if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("GET %s: %d %q %q; want a JSON answer", path, rec.Code, ct, rec.Body.Bytes())
		}
	}
}

// TestRawByteKeyRedirectedToAnotherKey: a key "é/../x" sent with its '/'
// escaped but its non-ASCII bytes raw (as a hand-written client or a
// script escaping only the slashes sends it) cannot be kept by net/url,
// which re-escapes it from the decoded path "é/../x"; a ServeMux would
// clean that to "x" and redirect a DELETE, token included, to key "x".
// The server refuses such a path (400) instead: it never sends a
// mutation to a key the request did not name.
func TestRawByteKeyRedirectedToAnotherKey(t *testing.T) {
	hs := httptest.NewServer(plainServer(t))
	t.Cleanup(hs.Close)
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(hangGuard)))
	_, err = io.WriteString(conn, "DELETE /api/hotkeys/\xc3\xa9%2F..%2Fx?app=shop&ttl=1m HTTP/1.1\r\n"+
		"Host: keyheat\r\nAuthorization: Bearer "+token+"\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.False(t, resp.StatusCode >= 300 && resp.StatusCode < 400,
		"DELETE of key \"é/../x\": %d redirect to %s", resp.StatusCode, resp.Header.Get("Location"))
}
