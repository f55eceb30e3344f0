package controlplane

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/keyheat/keyheat/hotkeys"
)

// HotKey is one entry of the registry as GET /api/hotkeys lists it: what
// the follower's set holds for the key.
type HotKey struct {
	App string `json:"app"`
	// Key is the key; when it is not UTF-8, JSON cannot carry it as it is
	// (each invalid byte reads U+FFFD) and KeyB64 holds its exact bytes in
	// standard base64.
	Key    string `json:"key"`
	KeyB64 []byte `json:"key_b64,omitempty"`
	// KeyHash is 16 lowercase hex digits of the key's 64-bit xxh3 hash, as
	// the registry's key_hash.
	KeyHash string `json:"key_hash"`
	// Source is "detector" or "manual".
	Source hotkeys.Source `json:"source"`
	// Mitigation is "local_cache", "split", "coalesce" or "none";
	// SplitFactor is set for "split" only.
	Mitigation  hotkeys.Mitigation `json:"mitigation"`
	SplitFactor int                `json:"split_factor,omitempty"`
	// Rate is events per second as the detector last published it, and
	// PeakRate the highest it published while the key stayed hot; 0 on a
	// manual entry.
	Rate     float64 `json:"rate"`
	PeakRate float64 `json:"peak_rate"`
	// Onset is the event time the key turned hot (detector) or the time it
	// was promoted (manual); Detected when its record was published.
	Onset    time.Time `json:"onset"`
	Detected time.Time `json:"detected"`
	// TTL (a Go duration, "10m0s") is how long the entry lasts without a
	// new record; Expires the instant it ends and ExpiresIn the time left
	// then, as of the answer. All three are absent on an entry that lasts
	// until the detector says it cooled.
	TTL       string     `json:"ttl,omitempty"`
	Expires   *time.Time `json:"expires,omitempty"`
	ExpiresIn string     `json:"expires_in,omitempty"`
	// LocalTTL, when set, overrides the applications' local-cache TTL for
	// the key.
	LocalTTL string `json:"local_ttl,omitempty"`
}

func hotKeyOf(e *hotkeys.Entry, now time.Time) HotKey {
	h := HotKey{App: e.App, Key: e.Key, KeyHash: keyHashHex(e.KeyHash), Source: e.Source,
		Mitigation: e.Mitigation, SplitFactor: e.SplitFactor, Rate: e.Rate, PeakRate: e.PeakRate,
		Onset: e.Onset.UTC(), Detected: e.Detected.UTC()}
	if !utf8.ValidString(e.Key) {
		h.KeyB64 = []byte(e.Key)
	}
	if e.TTL > 0 {
		h.TTL = e.TTL.String()
		exp := e.Expires.UTC()
		h.Expires = &exp
		h.ExpiresIn = max(0, exp.Sub(now)).Round(time.Millisecond).String()
	}
	if e.LocalTTL > 0 {
		h.LocalTTL = e.LocalTTL.String()
	}
	return h
}

// keyHashHex writes a key hash as the registry's key_hash does.
func keyHashHex(h uint64) string {
	var b [8]byte
	for i := range b {
		b[i] = byte(h >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}

// HotKeyPage is the answer of GET /api/hotkeys.
type HotKeyPage struct {
	// HotKeys are the page's entries in (app, key) order, keys compared
	// as bytes.
	HotKeys []HotKey `json:"hotkeys"`
	// NextCursor, when not empty, is the cursor of the next page: more
	// entries matched after this page's last one.
	NextCursor string `json:"next_cursor,omitempty"`
	// Total is the number of entries that matched the filters, on every
	// page, when this page was read.
	Total int `json:"total"`
}

// Published is the answer of a promote or demote: the manual entry
// published, and where Kafka acknowledged it.
type Published struct {
	// Action is "promote" or "demote".
	Action  string `json:"action"`
	App     string `json:"app"`
	Key     string `json:"key"`
	KeyB64  []byte `json:"key_b64,omitempty"`
	KeyHash string `json:"key_hash"`
	// Mitigation and SplitFactor are a promote's.
	Mitigation  string `json:"mitigation,omitempty"`
	SplitFactor int    `json:"split_factor,omitempty"`
	// TTL is how long the entry overrides the detector, from Created to
	// Expires.
	TTL      string    `json:"ttl"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	LocalTTL string    `json:"local_ttl,omitempty"`
	By       string    `json:"by,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	// Topic, Partition and Offset say where the record was written.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// apiError is the body of every answer that is not a success.
type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a value of ours that JSON cannot encode gets here: a bug.
		code, b = http.StatusInternalServerError, []byte(`{"error":"encode the answer"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg})
}
