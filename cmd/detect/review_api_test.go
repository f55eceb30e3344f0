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

	"github.com/keyheat/keyheat/config"
	"github.com/keyheat/keyheat/internal/cli"
	"github.com/keyheat/keyheat/internal/testenv"
)

// reviewAPI builds detect's operator API as runService does, over a kfake
// registry, and returns its own handler and the metrics mux it mounts on
// when api.addr is metrics.addr.
func reviewAPI(t *testing.T) (own, beside http.Handler, token string) {
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
	mux := cli.MetricsMux(reg, nil)
	a.mount(mux)
	return a.handler, mux, token
}

// TestReviewNonCanonicalPathNotRedirected: controlplane answers a path
// with a "." or ".." segment 400 and never redirects it ("/api/hotkeys/x/../y"
// is not the key y). detect mounts the Server under a standard
// http.ServeMux, which redirects such a path (307, method and body kept)
// before the Server sees it: a client that follows redirects, as Go's
// http.Client and curl -L do, demotes the key y.
func TestReviewNonCanonicalPathNotRedirected(t *testing.T) {
	own, beside, token := reviewAPI(t)
	for name, h := range map[string]http.Handler{"own_listener": own, "beside_metrics": beside} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			eventually(t, "the registry read", func() bool {
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

// TestReviewDashboardServed: README ("serves the operator API (and the
// dashboard at /)"), api.addr's doc and `detect demo`'s "Dashboard: <url>"
// promise a dashboard at /; the API's listener answers / with a plain 404.
func TestReviewDashboardServed(t *testing.T) {
	own, _, _ := reviewAPI(t)
	srv := httptest.NewServer(own)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET / (the dashboard): %s", b)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
}
