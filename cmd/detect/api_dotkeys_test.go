package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestAPIKeyOfDotSegmentsReachesAPI: a key made of ".." segments, sent
// percent-escaped as the dashboard sends it ("%2E%2E%2F%2E%2E"), is a key
// like any other: its promote and demote reach the API, not the
// dashboard (detect routes on the escaped path, where the key stays one
// segment).
func TestAPIKeyOfDotSegmentsReachesAPI(t *testing.T) {
	own, _, token := apiHandlers(t)
	srv := httptest.NewServer(own)
	t.Cleanup(srv.Close)
	testenv.Eventually(t, "the registry read", func() bool {
		resp, err := http.Get(srv.URL + "/api/hotkeys")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{http.MethodPost, "/api/hotkeys/%2E%2E%2F%2E%2E/promote", http.StatusCreated},
		{http.MethodDelete, "/api/hotkeys/%2E%2E%2F%2E%2E?app=shop&ttl=1m", http.StatusOK},
	} {
		var body io.Reader
		if c.method == http.MethodPost {
			body = bytes.NewReader([]byte(`{"app":"shop","mitigation":"local_cache","ttl":"1m"}`))
		}
		req, err := http.NewRequestWithContext(ctx(t), c.method, srv.URL+c.path, body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var pub struct{ Key string }
		_ = json.Unmarshal(b, &pub)
		require.Equal(t, c.code, resp.StatusCode, "%s %s answered %s", c.method, c.path, b)
		require.Equal(t, "../..", pub.Key, "%s %s", c.method, c.path)
	}
}
