package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/cmd/internal/cli"
	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/testenv"
)

// apiHandlers builds detect's operator API as runService does, over a
// kfake registry, and returns its own listener's handler and the one of
// a listener shared with /metrics.
func apiHandlers(t *testing.T) (own, beside http.Handler, token string) {
	t.Helper()
	seeds := testenv.KFake(t)
	hot := testenv.NewTopicWithConfigs(t, seeds, 2, map[string]string{"cleanup.policy": "compact"})
	reports := testenv.NewTopic(t, seeds, 2)
	token = "review-token-0123456789"
	cfg, err := config.Load(config.CmdDetect, config.Source{Environ: []string{}, Args: map[string]any{
		"kafka.brokers": seeds, "kafka.topics.hotkeys": hot, "kafka.topics.reports": reports,
		"api.addr": "127.0.0.1:1", "api.token": token}})
	require.NoError(t, err)
	clientOpts, err := cfg.Kafka.ClientOpts()
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	a, err := newOperatorAPI(cfg, clientOpts, reg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	return a.handler, a.withMetrics(cli.MetricsMux(reg, nil)), token
}

// TestAPINonCanonicalPathNotRedirected: a path under /api with a ".",
// ".." or empty segment is a JSON 400 on detect's listeners too, never a
// redirect: a ServeMux in front of the API would send a DELETE of
// "/api/hotkeys/x/../y" (method, body and token kept) to the key y.
func TestAPINonCanonicalPathNotRedirected(t *testing.T) {
	own, beside, token := apiHandlers(t)
	for name, h := range map[string]http.Handler{"own_listener": own, "beside_metrics": beside} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			testenv.Eventually(t, "the registry read", func() bool {
				resp, err := http.Get(srv.URL + "/api/hotkeys")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			})
			for _, p := range []string{"/api/hotkeys/x/../y?app=shop&ttl=1m", "/api/hotkeys/./y?app=shop&ttl=1m",
				"/api/hotkeys//y?app=shop&ttl=1m"} {
				req, err := http.NewRequestWithContext(ctx(t), http.MethodDelete, srv.URL+p, nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var pub struct{ Key string }
				_ = json.Unmarshal(b, &pub)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode, "DELETE %s answered %s (key %q demoted)", p, b, pub.Key)
				require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"), "DELETE %s: %s", p, b)
			}
		})
	}
}

// TestAPIDashboardServed: the API's listener serves the dashboard's page
// at /, alone or beside /metrics (which stays /metrics).
func TestAPIDashboardServed(t *testing.T) {
	own, beside, _ := apiHandlers(t)
	for name, h := range map[string]http.Handler{"own_listener": own, "beside_metrics": beside} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			resp, err := http.Get(srv.URL + "/")
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "GET / (the dashboard): %s", b)
			require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
			require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
		})
	}
	srv := httptest.NewServer(beside)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(b), "keyheat_api_", "/metrics beside the dashboard")
}
