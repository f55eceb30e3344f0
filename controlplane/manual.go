package controlplane

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/zeebo/xxh3"

	"github.com/keyheat/keyheat/hotkeys"
	"github.com/keyheat/keyheat/internal/keylog"
	"github.com/keyheat/keyheat/schemas"
)

// Bounds of a mutation's free-text fields.
const (
	maxAppBytes    = 256
	maxByBytes     = 256
	maxReasonBytes = 1024
)

// PromoteRequest is the JSON body of POST /api/hotkeys/{key}/promote.
type PromoteRequest struct {
	// App is the key's app; required.
	App string `json:"app"`
	// Mitigation is what applications do about the key: "local_cache",
	// "split" or "coalesce"; required.
	Mitigation string `json:"mitigation"`
	// SplitFactor is the number of physical keys a "split" spreads the
	// key over: a power of two from 2 to hotkeys.MaxSplitFactor; required
	// with "split" and absent otherwise.
	SplitFactor int `json:"split_factor,omitempty"`
	// TTL is how long the promote lasts, a Go duration ("10m", "1h30m")
	// from MinTTL to the server's MaxTTL; required.
	TTL string `json:"ttl"`
	// LocalTTL, with "local_cache" only, overrides the applications'
	// local-cache TTL for the key while the promote lasts.
	LocalTTL string `json:"local_ttl,omitempty"`
	// By and Reason say who promoted the key and why, for people.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// demoteParams are the query parameters of DELETE /api/hotkeys/{key};
// DELETE /api/hotkeys takes key_b64 too.
var demoteParams = []string{"app", "ttl", "by", "reason"}

// promote publishes a manual promote of the request's key.
func (s *Server) promote(w http.ResponseWriter, r *http.Request) {
	key, inPath, err := requestKey(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if _, err := singleParams(r, keyParams(inPath)...); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var req PromoteRequest
	if code, err := decodeBody(w, r, &req); err != nil {
		writeError(w, code, err.Error())
		return
	}
	m, err := s.promoteEntry(key, &req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.publish(w, r, m, http.StatusCreated)
}

// demote publishes a manual demote of the request's key.
func (s *Server) demote(w http.ResponseWriter, r *http.Request) {
	key, inPath, err := requestKey(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	q, err := singleParams(r, keyParams(inPath, demoteParams...)...)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	m := &schemas.ManualEntry{Version: schemas.ManualVersion, Action: schemas.ManualDemote, App: q["app"], Key: key,
		By: q["by"], Reason: q["reason"]}
	var errs []error
	errs = append(errs, s.checkKey(m.App, key)...)
	ttl, err := s.parseTTL("ttl", q["ttl"], true)
	errs = append(errs, err)
	errs = append(errs, checkText("by", m.By, maxByBytes), checkText("reason", m.Reason, maxReasonBytes))
	if err := errors.Join(errs...); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	m.TTLMs, m.CreatedMs = ttl.Milliseconds(), s.now().UnixMilli()
	s.publish(w, r, m, http.StatusOK)
}

// keyParams returns the query parameters a mutation takes: params, and
// key_b64 when the path names no key.
func keyParams(inPath bool, params ...string) []string {
	if inPath {
		return params
	}
	return append(slices.Clip(params), "key_b64")
}

// requestKey returns the key a mutation names, and whether its path names
// it: the path's key segment percent-decoded ("%2F" is a '/' of the key),
// or, on the routes without one, the key_b64 query parameter.
//
// It reads the key from the escaped path rather than from the mux's {key}
// value, which is the same but for a segment of "%2F" alone: the mux
// takes it for a trailing slash, so the key "/" reaches the handler only
// through the {path...} routes.
func requestKey(r *http.Request) (key string, inPath bool, err error) {
	seg, inPath := keySegment(r)
	if inPath {
		if r.URL.Query().Has("key_b64") {
			return "", true, errors.New("the key is in the path; key_b64 is for the routes without one (POST /api/hotkeys/promote, DELETE /api/hotkeys)")
		}
		key, err := url.PathUnescape(seg)
		if err != nil {
			return "", true, errors.New("the key in the path is not percent-escaped properly")
		}
		return key, true, nil
	}
	b64 := r.URL.Query().Get("key_b64")
	if b64 == "" {
		return "", false, errors.New("no key: put it in the path (percent-escaped) or in key_b64")
	}
	key, err = decodeKeyB64(b64)
	return key, false, err
}

// keySegment returns the escaped key segment of a mutation's path:
// /api/hotkeys/<key>, or /api/hotkeys/<key>/promote for a POST.
func keySegment(r *http.Request) (string, bool) {
	return keyOfPath(r.URL.EscapedPath(), r.Method == http.MethodPost)
}

func keyOfPath(escaped string, promote bool) (string, bool) {
	rest, ok := strings.CutPrefix(escaped, "/api/hotkeys/")
	if !ok {
		return "", false
	}
	if promote {
		if rest, ok = strings.CutSuffix(rest, "/promote"); !ok {
			return "", false
		}
	}
	if rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	return rest, true
}

// decodeKeyB64 reads a key_b64 parameter: base64 of the key's bytes, in
// the standard or the URL-safe alphabet, with or without padding.
func decodeKeyB64(s string) (string, error) {
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	b, err := enc.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		hint := ""
		if strings.Contains(s, " ") {
			hint = " (a '+' of standard base64 must be sent as %2B in a query, or use the URL-safe alphabet)"
		}
		return "", fmt.Errorf("key_b64 is not base64%s", hint)
	}
	return string(b), nil
}

// promoteEntry builds the manual entry a promote request asks for.
func (s *Server) promoteEntry(key string, req *PromoteRequest) (*schemas.ManualEntry, error) {
	errs := s.checkKey(req.App, key)
	var mit hotkeys.Mitigation
	switch err := mit.UnmarshalText([]byte(req.Mitigation)); {
	case req.Mitigation == "":
		errs = append(errs, errors.New("mitigation is required: local_cache, split or coalesce"))
	case err != nil, mit == hotkeys.MitigationNone:
		errs = append(errs, fmt.Errorf("mitigation %q: want local_cache, split or coalesce (to stop a key being hot, DELETE it)", req.Mitigation))
	case mit == hotkeys.MitigationSplit:
		if f := req.SplitFactor; f < 2 || f > hotkeys.MaxSplitFactor || f&(f-1) != 0 {
			errs = append(errs, fmt.Errorf("split_factor is %d: split needs a power of two from 2 to %d", f, hotkeys.MaxSplitFactor))
		}
	case req.SplitFactor != 0:
		errs = append(errs, fmt.Errorf("split_factor is %d: only split takes one", req.SplitFactor))
	}
	ttl, err := s.parseTTL("ttl", req.TTL, true)
	errs = append(errs, err)
	localTTL, err := s.parseTTL("local_ttl", req.LocalTTL, false)
	errs = append(errs, err)
	if localTTL > 0 && mit != hotkeys.MitigationLocalCache {
		errs = append(errs, errors.New("local_ttl applies to mitigation local_cache only"))
	}
	errs = append(errs, checkText("by", req.By, maxByBytes), checkText("reason", req.Reason, maxReasonBytes))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	kind := map[hotkeys.Mitigation]string{hotkeys.MitigationLocalCache: schemas.MitigationLocalCache,
		hotkeys.MitigationSplit: schemas.MitigationSplit, hotkeys.MitigationCoalesce: schemas.MitigationCoalesce}[mit]
	return &schemas.ManualEntry{Version: schemas.ManualVersion, Action: schemas.ManualPromote, App: req.App, Key: key,
		Mitigation: &schemas.Mitigation{Kind: kind, Split: req.SplitFactor},
		TTLMs:      ttl.Milliseconds(), CreatedMs: s.now().UnixMilli(), LocalTTLMs: localTTL.Milliseconds(),
		By: req.By, Reason: req.Reason}, nil
}

// checkKey checks a mutation's app and key; its errors never quote the
// key.
func (s *Server) checkKey(app, key string) []error {
	var errs []error
	switch {
	case app == "":
		errs = append(errs, errors.New("app is required"))
	case len(app) > maxAppBytes:
		errs = append(errs, fmt.Errorf("app is %d bytes, limit %d", len(app), maxAppBytes))
	case !utf8.ValidString(app):
		errs = append(errs, errors.New("app is not UTF-8"))
	}
	switch {
	case key == "":
		errs = append(errs, errors.New("key is empty"))
	case len(key) > s.cfg.MaxKeyBytes:
		errs = append(errs, fmt.Errorf("key is %d bytes, limit %d", len(key), s.cfg.MaxKeyBytes))
	}
	return errs
}

// parseTTL reads a duration parameter: a Go duration from MinTTL to
// MaxTTL. An empty one is 0, or an error when required.
func (s *Server) parseTTL(name, v string, required bool) (time.Duration, error) {
	if v == "" {
		if required {
			return 0, fmt.Errorf("%s is required: a Go duration such as \"10m\", from %v to %v", name, MinTTL, s.cfg.MaxTTL)
		}
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a Go duration such as \"10m\" or \"1h30m\"", name, v)
	}
	if d < MinTTL || d > s.cfg.MaxTTL {
		return 0, fmt.Errorf("%s is %v: want from %v to %v", name, d, MinTTL, s.cfg.MaxTTL)
	}
	return d.Truncate(time.Millisecond), nil
}

func checkText(name, v string, limit int) error {
	switch {
	case len(v) > limit:
		return fmt.Errorf("%s is %d bytes, limit %d", name, len(v), limit)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not UTF-8", name)
	}
	return nil
}

// decodeBody reads r's JSON body into v: one object of known fields, at
// most MaxBodyBytes. On an error it returns the status to answer.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return http.StatusRequestEntityTooLarge, fmt.Errorf("the body is over %d bytes", MaxBodyBytes)
		}
		return http.StatusBadRequest, fmt.Errorf("read the body: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return http.StatusBadRequest, fmt.Errorf("the body is not the JSON object this route takes: %w", err)
	}
	if dec.More() {
		return http.StatusBadRequest, errors.New("the body has more after its JSON object")
	}
	return 0, nil
}

// publish writes m to the registry and answers code with it once Kafka
// acknowledged it, or 503 when it did not within the request's context
// and PublishTimeout.
func (s *Server) publish(w http.ResponseWriter, r *http.Request, m *schemas.ManualEntry, code int) {
	hash := keyHashHex(xxh3.HashString(m.Key))
	value, err := m.AppendJSON(nil)
	if err != nil {
		// The checks above let through an entry schemas refuses: a bug
		// of ours, not the request's.
		s.log.Error("controlplane: encode a manual entry", "app", m.App, keylog.Attr(m.Key, s.cfg.LogRawKeys), "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.PublishTimeout)
	defer cancel()
	rec := &kgo.Record{Topic: s.cfg.Topic, Key: schemas.ManualRecordKey(m.App, m.Key), Value: value}
	// Produce with a callback rather than ProduceSync: a record already
	// sent is not failed when ctx ends (franz-go cannot take it back), and
	// the answer must not wait for it beyond ctx.
	done := make(chan error, 1)
	s.cfg.Producer.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err = <-done:
	case <-ctx.Done():
		// An acknowledgement that came at the same moment still counts.
		select {
		case err = <-done:
		default:
			err = ctx.Err()
		}
	}
	if err != nil {
		s.log.Warn("controlplane: publish a manual entry", "action", m.Action, "app", m.App, keylog.Attr(m.Key, s.cfg.LogRawKeys), "err", err)
		msg := fmt.Sprintf("Kafka did not acknowledge the %s: %v", m.Action, err)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			msg = fmt.Sprintf("Kafka did not acknowledge the %s in time; it may still be written; retrying is safe, the key's latest manual entry replaces it", m.Action)
		}
		writeError(w, http.StatusServiceUnavailable, msg)
		return
	}
	ttl := time.Duration(m.TTLMs) * time.Millisecond
	s.log.Info("controlplane: "+m.Action, "app", m.App, keylog.Attr(m.Key, s.cfg.LogRawKeys), "ttl", ttl, "by", m.By,
		"partition", rec.Partition, "offset", rec.Offset)
	out := Published{Action: m.Action, App: m.App, Key: m.Key, KeyHash: hash, TTL: ttl.String(),
		Created: time.UnixMilli(m.CreatedMs).UTC(), Expires: time.UnixMilli(m.ExpiresMs()).UTC(),
		By: m.By, Reason: m.Reason, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
	if !utf8.ValidString(m.Key) {
		out.KeyB64 = []byte(m.Key)
	}
	if m.Mitigation != nil {
		out.Mitigation, out.SplitFactor = m.Mitigation.Kind, m.Mitigation.Split
	}
	if m.LocalTTLMs > 0 {
		out.LocalTTL = (time.Duration(m.LocalTTLMs) * time.Millisecond).String()
	}
	writeJSON(w, code, out)
}
