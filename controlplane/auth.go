package controlplane

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// LoadToken returns the API's bearer token: value (api.token) as it is, or
// the contents of the file at path file (api.token_file) without its
// trailing line breaks. Both empty is no token (mutations refused); both set is
// an error, as is an empty file or a token a client cannot send in an
// Authorization header (spaces, control characters). Its errors never
// quote the token.
func LoadToken(value, file string) (string, error) {
	if value != "" && file != "" {
		return "", errors.New("api.token and api.token_file are both set; set one of them")
	}
	tok, what := value, "api.token"
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("api.token_file: %w", err)
		}
		tok, what = string(b), "api.token_file "+file
		tok = strings.TrimRight(tok, "\r\n")
		if tok == "" {
			return "", fmt.Errorf("%s is empty; write the token in it, or leave api.token_file unset to refuse mutations", what)
		}
	}
	if tok == "" {
		return "", nil
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return tok, nil
}

// checkToken refuses a token that cannot travel in an Authorization
// header as "Bearer <token>": only visible ASCII, no spaces.
func checkToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("the token has a space, control or non-ASCII byte at offset %d; use visible ASCII only", i)
		}
	}
	return nil
}

// mutate guards a handler that changes the registry: it needs the token,
// and without a configured token it is refused.
func (s *Server) mutate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Token == "" {
			writeError(w, http.StatusForbidden,
				"changes through the API are disabled: no API token is configured; set api.token or api.token_file")
			return
		}
		if s.authorized(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// read guards a handler that only reads: it needs the token when
// ProtectReads is set.
func (s *Server) read(h http.Handler) http.Handler {
	if !s.cfg.ProtectReads {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorized(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// authorized reports whether r carries the token, and answers 401 when it
// does not. The comparison takes the same time whatever the token sent:
// both sides are hashed first, so not even the configured token's length
// shows.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	sent, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="keyheat"`)
		writeError(w, http.StatusUnauthorized, "missing bearer token: send the header Authorization: Bearer <api.token>")
		s.log.Debug("controlplane: request without a bearer token", "route", routeLabel(r.Pattern), "remote", r.RemoteAddr)
		return false
	}
	a, b := sha256.Sum256([]byte(sent)), sha256.Sum256([]byte(s.cfg.Token))
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="keyheat", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "invalid bearer token")
		s.log.Debug("controlplane: request with a wrong bearer token", "route", routeLabel(r.Pattern), "remote", r.RemoteAddr)
		return false
	}
	return true
}

// bearer returns the token of an "Authorization: Bearer <token>" header
// (the scheme's case does not matter).
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
