package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// apiList is GET /api/hotkeys as a test reads it.
type apiList struct {
	Hotkeys []struct {
		App, Key, Source, Mitigation string
		KeyB64                       []byte `json:"key_b64"`
	} `json:"hotkeys"`
}

// apiCall sends method to url with the bearer token (none when empty) and
// body, and returns the status and the answer.
func apiCall(t *testing.T, method, u, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx(t), method, u, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// listed returns source of app's key in GET /api/hotkeys, "" when absent.
func listed(t *testing.T, base, app, key string) string {
	t.Helper()
	code, b := apiCall(t, "GET", base+"api/hotkeys?limit=1000", "", nil)
	if code != http.StatusOK {
		return ""
	}
	var l apiList
	require.NoError(t, json.Unmarshal(b, &l), "%s", b)
	for _, h := range l.Hotkeys {
		k := h.Key
		if h.KeyB64 != nil {
			k = string(h.KeyB64) // the key's bytes, where they are not UTF-8
		}
		if h.App == app && k == key {
			return h.Source
		}
	}
	return ""
}

// TestAPIServed: detect run with api.addr serves the operator API over the
// registry it writes: the detector's hot key is listed, an operator's
// promote (token from the environment, which no log line shows) and
// demote are published and seen, a change without the token is refused,
// and SIGTERM stops it cleanly. With api.addr equal to metrics.addr one
// listener serves both.
func TestAPIServed(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := "own_listener"
		if shared {
			name = "beside_metrics"
		}
		t.Run(name, func(t *testing.T) {
			seeds := testenv.KFake(t)
			e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 2))
			apiAddr, metricsAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
			if shared {
				metricsAddr = apiAddr
			}
			const token = "s3cret-t0ken-for-the-test"
			p := start(t, []string{"KEYHEAT_API_TOKEN=" + token},
				append([]string{"run", sinkRules, "--api.addr=" + apiAddr, "--metrics.addr=" + metricsAddr}, e.flags()...)...)
			base := "http://" + apiAddr + "/"
			testenv.Eventually(t, "the API answers", func() bool {
				code, _ := apiCall(t, "GET", base+"api/hotkeys", "", nil)
				return code == http.StatusOK
			})
			if shared {
				code, m := apiCall(t, "GET", base+"metrics", "", nil)
				require.Equal(t, http.StatusOK, code)
				require.Contains(t, string(m), "keyheat_api_requests_total")
			}

			// The detector's key: "hot" at 250/s over a 200/s rule.
			start := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
			produceEvents(t, seeds, e.events, 3000, start, 1, 4, 100)
			testenv.Eventually(t, "the detector's hot key listed", func() bool { return listed(t, base, "app", "hot") == "detector" })

			// Reports, alerts and the key's windows, read back from Kafka.
			testenv.Eventually(t, "a cluster report", func() bool {
				code, b := apiCall(t, "GET", base+"api/reports/latest", "", nil)
				return code == http.StatusOK && strings.Contains(string(b), `"key":"hot"`)
			})
			testenv.Eventually(t, "the alert", func() bool {
				code, b := apiCall(t, "GET", base+"api/alerts?app=app", "", nil)
				return code == http.StatusOK && strings.Contains(string(b), `"type":"hot"`)
			})
			// The app's reports are records of their own, read when they
			// come: the key's windows are waited for.
			var st struct {
				Windows []struct{ Count uint64 }
				Alerted bool
			}
			var b []byte
			testenv.Eventually(t, "the key's windows", func() bool {
				var code int
				code, b = apiCall(t, "GET", base+"api/hotkeys/hot/stats?app=app", "", nil)
				require.Equal(t, http.StatusOK, code, "%s", b)
				require.NoError(t, json.Unmarshal(b, &st))
				return len(st.Windows) > 0
			})
			require.True(t, st.Alerted, "%s", b)
			require.Positive(t, st.Windows[0].Count, "%s", b)

			// An operator's promote of a key with a '/' and non-ASCII bytes.
			key := "user/42 é"
			promote := base + "api/hotkeys/" + url.PathEscape(key) + "/promote"
			req := map[string]any{"app": "app", "mitigation": "split", "split_factor": 4, "ttl": "10m", "reason": "test"}
			code, b := apiCall(t, "POST", promote, "", req)
			require.Equal(t, http.StatusUnauthorized, code, "%s", b)
			code, b = apiCall(t, "POST", promote, "wrong", req)
			require.Equal(t, http.StatusUnauthorized, code, "%s", b)
			code, b = apiCall(t, "POST", promote, token, req)
			require.Equal(t, http.StatusCreated, code, "%s", b)
			testenv.Eventually(t, "the promoted key listed", func() bool { return listed(t, base, "app", key) == "manual" })

			// A demote of the detector's key hides it.
			code, b = apiCall(t, "DELETE", base+"api/hotkeys/hot?app=app&ttl=10m", token, nil)
			require.Equal(t, http.StatusOK, code, "%s", b)
			testenv.Eventually(t, "the demoted key gone", func() bool { return listed(t, base, "app", "hot") == "" })

			require.Equal(t, 0, p.Stop())
			require.NotContains(t, p.Stderr.String(), token, "the token in a log line")
			require.NotContains(t, p.Stdout.String(), token)
			require.True(t, strings.Contains(p.Stderr.String(), "serving the operator API"), "the log says where the API is")
		})
	}
}
