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
)

// reviewServer is a server whose follower and producer reach no broker:
// enough for what is answered before Kafka matters.
func reviewServer(t *testing.T) *controlplane.Server {
	t.Helper()
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(closedAddr(t))}})
	require.NoError(t, err)
	t.Cleanup(f.Close)
	s, err := controlplane.New(controlplane.Config{Follower: f, Producer: unreachableProducer(t), Token: token})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// TestReviewWrongMethodOnKeyPath: the package comment promises "404 for a
// path no route knows, 405 with Allow for a method the path does not
// take". GET and PUT on a key's paths get that 405, but DELETE on a
// promote path and POST on a key path reach the catch-all
// "DELETE|POST /api/hotkeys/{path...}" routes, whose keyPathOnly answers
// 404 "no such API route" for a path that has one.
func TestReviewWrongMethodOnKeyPath(t *testing.T) {
	s := reviewServer(t)
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

// TestReviewEveryAnswerJSON: "Every answer is JSON", and Server is a
// handler "for the caller to mount under /api/ of its own mux or serve
// alone". Served alone, a path outside /api/ gets net/http's text 404, and
// paths the inner ServeMux cleans or extends (a doubled slash, a "."
// segment, "/api" without its slash) get a text/html 307 redirect.
func TestReviewEveryAnswerJSON(t *testing.T) {
	s := reviewServer(t)
	for _, path := range []string{"/", "/metrics", "/api", "//api/hotkeys", "/api/./hotkeys", "/api/hotkeys/x/../y/promote"} {
		rec := httpRecord(s, "GET", path, nil, "")
		if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("GET %s: %d %q %q; want a JSON answer", path, rec.Code, ct, rec.Body.Bytes())
		}
	}
}

// TestReviewRawByteKeyRedirectedToAnotherKey: a key "é/../x" sent with its
// '/' escaped but its non-ASCII bytes raw (as a hand-written client or a
// script escaping only the slashes sends it; curl escapes them itself,
// so it is not one of these). net/url cannot keep
// such a raw path, so URL.EscapedPath re-escapes it from the decoded path,
// where "%2F" is a plain '/'; the ServeMux cleans "é/../x" to "x" and
// answers 307 to /api/hotkeys/x with the query kept. A client that
// follows redirects (curl -L, Go's http.Client) repeats the DELETE, token
// included, on key "x": a key nobody named is demoted. The server should
// act on the key the request line names, or refuse it (400), never send
// the mutation to another key.
func TestReviewRawByteKeyRedirectedToAnotherKey(t *testing.T) {
	hs := httptest.NewServer(reviewServer(t))
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
