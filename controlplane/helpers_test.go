package controlplane_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// hangGuard bounds every wait: a test waits for a condition, never for a
// duration, and fails with a message instead of hanging when the
// condition never comes. It is the project's testenv.HangGuard, so that
// a starved machine passes what a fast one passes.
const hangGuard = testenv.HangGuard

// token is the bearer token of the test servers.
const token = "s3cr3t-t0ken-for-tests-0123456789"

// registry is a compacted registry topic and a client writing it.
type registry struct {
	t          testing.TB
	seeds      []string
	topic      string
	partitions int32
	cl         *kgo.Client
	byPart     *kgo.Client // writes each record to the partition it names
	barriers   int
}

// newRegistry makes a registry topic on a kfake cluster of the test's own.
func newRegistry(t testing.TB, partitions int32) *registry {
	t.Helper()
	return openRegistry(t, testenv.KFake(t), partitions)
}

// openRegistry makes a registry topic on the cluster at seeds.
func openRegistry(t testing.TB, seeds []string, partitions int32) *registry {
	t.Helper()
	topic := testenv.NewTopicWithConfigs(t, seeds, partitions, map[string]string{"cleanup.policy": "compact"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	byPart, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(byPart.Close)
	return &registry{t: t, seeds: seeds, topic: topic, partitions: partitions, cl: cl, byPart: byPart}
}

// barrierApp is the app of the barrier keys; lists of other apps never
// show them.
const barrierApp = "_barrier"

// barrier returns once each of fs has applied every record written to
// the registry before barrier was called: it writes a new hot key to
// every partition and waits until fs see them all (a follower applies a
// partition's records in order).
func (r *registry) barrier(fs ...*hotkeys.Follower) {
	r.t.Helper()
	r.barriers++
	var recs []*kgo.Record
	var keys []string
	for p := range r.partitions {
		key := "b" + strconv.Itoa(r.barriers) + "p" + strconv.Itoa(int(p))
		rec := bulkHot(barrierApp, key, 1)
		rec.Partition = p
		recs, keys = append(recs, rec), append(keys, key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	require.NoError(r.t, r.byPart.ProduceSync(ctx, recs...).FirstErr())
	for _, f := range fs {
		for _, k := range keys {
			testenv.Eventually(r.t, "barrier key "+k, func() bool { return f.IsHot(barrierApp, k) })
		}
	}
}

func (r *registry) produce(recs ...*kgo.Record) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	require.NoError(r.t, r.cl.ProduceSync(ctx, recs...).FirstErr())
}

// follower starts a follower of the registry, ready, closed when the test
// ends.
func (r *registry) follower() *hotkeys.Follower {
	r.t.Helper()
	f, err := hotkeys.NewFollower(hotkeys.FollowerConfig{Topic: r.topic,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(r.seeds...), kgo.MetadataMinAge(100 * time.Millisecond)}})
	require.NoError(r.t, err)
	r.t.Cleanup(f.Close)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	require.NoError(r.t, f.WaitReady(ctx))
	return f
}

// server builds a Server over f writing to the registry with the test's
// token unless cfg says otherwise, and serves it over HTTP.
func (r *registry) server(f *hotkeys.Follower, cfg controlplane.Config) *api {
	r.t.Helper()
	cfg.Follower, cfg.Producer, cfg.Topic = f, r.cl, r.topic
	return serve(r.t, cfg)
}

// api is a Server served over HTTP, and a client of it.
type api struct {
	t     testing.TB
	srv   *controlplane.Server
	base  string
	token string
}

func serve(t testing.TB, cfg controlplane.Config) *api {
	t.Helper()
	s, err := controlplane.New(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return &api{t: t, srv: s, base: hs.URL, token: cfg.Token}
}

// reply is an answer of the API.
type reply struct {
	code   int
	header http.Header
	body   []byte
}

// errorText is the error of a JSON error body; it fails the test if the
// body is not one.
func (r reply) errorText(t testing.TB) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.body, &e), "body %s", r.body)
	require.NotEmpty(t, e.Error, "body %s", r.body)
	return e.Error
}

// do sends a request with the api's token (when it has one) and reads the
// answer.
func (a *api) do(method, path string, body []byte) reply {
	a.t.Helper()
	return a.doAuth(method, path, body, a.token)
}

// doAuth sends a request with tok as its bearer token ("" for none).
func (a *api) doAuth(method, path string, body []byte, tok string) reply {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	require.NoError(a.t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	require.Equal(a.t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s %s: %d %s", method, path, resp.StatusCode, b)
	return reply{code: resp.StatusCode, header: resp.Header, body: b}
}

// keyPath is key as one path segment: percent-escaped, '.' and '..' too.
func keyPath(key string) string {
	switch key {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(key)
}

// promoteBody is a promote request's JSON.
func promoteBody(t testing.TB, req controlplane.PromoteRequest) []byte {
	t.Helper()
	b, err := json.Marshal(req)
	require.NoError(t, err)
	return b
}

// promote promotes key of app with req (App set from app) through the
// path form, and returns what the API published.
func (a *api) promote(app, key string, req controlplane.PromoteRequest) controlplane.Published {
	a.t.Helper()
	req.App = app
	r := a.do("POST", "/api/hotkeys/"+keyPath(key)+"/promote", promoteBody(a.t, req))
	require.Equal(a.t, http.StatusCreated, r.code, "promote: %s", r.body)
	return decode[controlplane.Published](a.t, r.body)
}

// demote demotes key of app for ttl through the path form.
func (a *api) demote(app, key, ttl string) controlplane.Published {
	a.t.Helper()
	r := a.do("DELETE", "/api/hotkeys/"+keyPath(key)+"?"+url.Values{"app": {app}, "ttl": {ttl}}.Encode(), nil)
	require.Equal(a.t, http.StatusOK, r.code, "demote: %s", r.body)
	return decode[controlplane.Published](a.t, r.body)
}

// list reads one page.
func (a *api) list(q url.Values) controlplane.HotKeyPage {
	a.t.Helper()
	r := a.do("GET", "/api/hotkeys?"+q.Encode(), nil)
	require.Equal(a.t, http.StatusOK, r.code, "list: %s", r.body)
	return decode[controlplane.HotKeyPage](a.t, r.body)
}

// all walks every page of the list with the given filters.
func (a *api) all(q url.Values) []controlplane.HotKey {
	a.t.Helper()
	var out []controlplane.HotKey
	q.Set("limit", strconv.Itoa(controlplane.MaxLimit))
	for {
		p := a.list(q)
		out = append(out, p.HotKeys...)
		if p.NextCursor == "" {
			return out
		}
		q.Set("cursor", p.NextCursor)
	}
}

// listed returns the entry the list holds for key of app.
func (a *api) listed(app, key string) (controlplane.HotKey, bool) {
	a.t.Helper()
	for _, h := range a.all(url.Values{"app": {app}}) {
		if keyOf(a.t, h) == key {
			return h, true
		}
	}
	return controlplane.HotKey{}, false
}

// keyOf is a listed entry's exact key.
func keyOf(t testing.TB, h controlplane.HotKey) string {
	t.Helper()
	if h.KeyB64 != nil {
		return string(h.KeyB64)
	}
	return h.Key
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "body %s", b)
	return v
}

// detector is a detector record of key of app, of type typ.
func detector(typ, app, key string, rate float64) *kgo.Record {
	now := time.Now().UnixMilli()
	h := schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: schemas.HotKeyID("keyheat.events", 0, "r", typ, app, key, now),
		Type: typ, App: app, Key: key, Rule: "r", Rate: rate, PeakRate: rate, OnsetMs: now, DetectedMs: now}
	if typ != schemas.HotKeyCooled {
		h.Mitigation = &schemas.Mitigation{Kind: schemas.MitigationLocalCache}
	}
	v, err := h.AppendJSON(nil)
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Key: schemas.HotKeyRecordKey(app, key), Value: v}
}

// bulkHot is a detector hot record for a key of plain ASCII, written
// without reflection: tests write thousands of them, under -race too.
func bulkHot(app, key string, rate float64) *kgo.Record {
	v := make([]byte, 0, 300)
	v = append(v, `{"v":1,"id":"x","type":"hot","app":`...)
	v = strconv.AppendQuote(v, app)
	v = append(v, `,"key":`...)
	v = strconv.AppendQuote(v, key)
	v = append(v, `,"key_hash":"","rule":"r","rate":`...)
	v = strconv.AppendFloat(v, rate, 'g', -1, 64)
	v = append(v, `,"threshold":0,"count":0,"window_ms":0,"topic":"","partition":0,"onset_ms":1767225600000,"detected_ms":1767225600008,"reads":0,"writes":0,"bytes":0,"mitigation":{"kind":"local_cache"}}`...)
	return &kgo.Record{Key: schemas.HotKeyRecordKey(app, key), Value: v}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// unreachableProducer is a Kafka client whose broker refuses connections:
// nothing it produces is ever acknowledged.
func unreachableProducer(t testing.TB) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(testenv.FreeAddr(t)))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

type httpRecorder = httptest.ResponseRecorder

func newRecorder() *httpRecorder { return httptest.NewRecorder() }

func newRequest(method, path string, body []byte) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return httptest.NewRequest(method, path, rd)
}
