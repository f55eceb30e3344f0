package logparse

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/keyheat/keyheat/schemas"
)

// Key sources of the combined parser.
const (
	KeyPath        = "path"         // the request target as logged, query included
	KeyPathNoQuery = "path_noquery" // the request target up to '?'
	KeyQuery       = "query"        // the value of one query parameter (CombinedConfig.QueryParam)
)

// CombinedConfig configures the nginx/Apache combined log parser.
type CombinedConfig struct {
	// Key is where the access key comes from: path, path_noquery
	// (default) or query.
	Key string `mapstructure:"key"`
	// QueryParam names the query parameter whose value is the key when
	// Key is query. The value is URL-decoded.
	QueryParam string `mapstructure:"query_param"`
}

// Combined parses the nginx/Apache combined log format,
//
//	127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif?x=1 HTTP/1.0" 200 2326 "http://ref/" "Mozilla/5.0"
//
// and the common format (the same without referer and user agent). Fields
// after the user agent (nginx setups often append $request_time) are
// ignored. Op is the method, Client the remote address, Status and Bytes
// the response's; the key is taken from the request target as configured.
// Paths are keys as logged: not percent-decoded, so one resource is one key
// however clients spelled it only if they spelled it the same.
type Combined struct {
	key   string
	param string
	app   string
}

var _ Parser = (*Combined)(nil)

// NewCombined returns a combined-format parser; app is every event's app.
func NewCombined(cfg CombinedConfig, app string) (*Combined, error) {
	switch cfg.Key {
	case "":
		cfg.Key = KeyPathNoQuery
	case KeyPath, KeyPathNoQuery:
	case KeyQuery:
		if cfg.QueryParam == "" {
			return nil, fmt.Errorf("combined: key %q needs query_param", KeyQuery)
		}
	default:
		return nil, fmt.Errorf("combined: key %q is not one of path, path_noquery, query", cfg.Key)
	}
	return &Combined{key: cfg.Key, param: cfg.QueryParam, app: app}, nil
}

// Name returns "combined".
func (*Combined) Name() string { return "combined" }

// Parse implements Parser.
func (p *Combined) Parse(dst []schemas.AccessEvent, line []byte) ([]schemas.AccessEvent, Fields, error) {
	e, err := p.parse(line)
	if err != nil {
		return dst, 0, err
	}
	return append(dst, e), 0, nil
}

func (p *Combined) parse(line []byte) (schemas.AccessEvent, error) {
	var e schemas.AccessEvent
	// One conversion per line: every string below is a substring of s, so a
	// line costs one allocation however many fields it has.
	s := string(line)
	i := strings.IndexByte(s, ' ')
	if i <= 0 {
		return e, parseErr("combined: no remote address")
	}
	client := s[:i]
	lb := strings.IndexByte(s[i:], '[')
	if lb < 0 {
		return e, parseErr("combined: no [time]")
	}
	lb += i
	rb := strings.IndexByte(s[lb:], ']')
	if rb < 0 {
		return e, parseErr("combined: unterminated [time]")
	}
	rb += lb
	ms, ok := parseCombinedTime(s[lb+1 : rb])
	if !ok {
		return e, parseErr("combined: time %q is not like 10/Oct/2000:13:55:36 -0700", s[lb+1:rb])
	}
	rest := s[rb+1:]
	if len(rest) < 2 || rest[0] != ' ' || rest[1] != '"' {
		return e, parseErr("combined: no quoted request after the time")
	}
	req, rest, ok := quoted(rest[1:])
	if !ok {
		return e, parseErr("combined: unterminated request")
	}
	// "METHOD TARGET PROTOCOL"; HTTP/0.9 lines have no protocol.
	sp := strings.IndexByte(req, ' ')
	if sp <= 0 {
		return e, parseErr("combined: request %q is not METHOD TARGET PROTOCOL", truncate(req, 64))
	}
	method, target := req[:sp], req[sp+1:]
	if j := strings.LastIndexByte(target, ' '); j >= 0 {
		target = target[:j]
	}
	status, rest, ok := field(rest)
	if !ok {
		return e, parseErr("combined: no status")
	}
	st, err := strconv.ParseInt(status, 10, 32)
	if err != nil || st < 0 {
		return e, parseErr("combined: status %q is not a number", truncate(status, 16))
	}
	size, _, ok := field(rest)
	if !ok {
		return e, parseErr("combined: no body size")
	}
	var n int64
	if size != "-" {
		if n, err = strconv.ParseInt(size, 10, 64); err != nil || n < 0 {
			return e, parseErr("combined: body size %q is not a number", truncate(size, 16))
		}
	}
	if strings.IndexByte(target, '\\') >= 0 {
		target = unescapeLogged(target)
	}
	key, err := p.keyOf(target)
	if err != nil {
		return e, err
	}
	return schemas.AccessEvent{TimeMs: ms, Key: key, App: p.app, Op: method, Bytes: n, Status: int32(st), Client: client}, nil
}

func (p *Combined) keyOf(target string) (string, error) {
	switch p.key {
	case KeyPath:
		if target == "" {
			return "", emptyKey("combined: empty request target")
		}
		return target, nil
	case KeyPathNoQuery:
		if q := strings.IndexByte(target, '?'); q >= 0 {
			target = target[:q]
		}
		if target == "" {
			return "", emptyKey("combined: empty request path")
		}
		return target, nil
	}
	q := strings.IndexByte(target, '?')
	if q < 0 {
		return "", emptyKey("combined: no query string holding " + p.param)
	}
	query := target[q+1:]
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query = query[:h]
	}
	for query != "" {
		var kv string
		kv, query, _ = strings.Cut(query, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != p.param {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			if d, err := url.QueryUnescape(v); err == nil {
				v = d
			}
		}
		if v == "" {
			return "", emptyKey("combined: query parameter " + p.param + " is empty")
		}
		return v, nil
	}
	return "", emptyKey("combined: no query parameter " + p.param)
}

// unescapeLogged undoes the escaping nginx (\xHH for bytes outside
// printable ASCII and for '"') and Apache (\" and \\, \n, \t, \xHH)
// apply to the request line, so /caf\xC3\xA9 keys "/café" as the
// application saw it. Both escapings are a subset of Go's quoting, so
// strconv.Unquote reads them; a target with any other backslash sequence
// was not escaped by either server and stays as logged. Bytes that do not
// form UTF-8 stay as they are and fail the key check downstream.
func unescapeLogged(s string) string {
	if !utf8.ValidString(s) {
		return s // Unquote would turn raw invalid bytes into U+FFFD
	}
	if u, err := strconv.Unquote(`"` + s + `"`); err == nil {
		return u
	}
	return s
}

// quoted reads a double-quoted string at the start of s (s[0] == '"') and
// returns its content and what follows the closing quote. nginx writes a
// quote inside a value as \x22 and Apache as \", so a quote preceded by an
// odd number of backslashes does not end the string.
func quoted(s string) (content, rest string, ok bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return s[1:i], s[i+1:], true
		}
	}
	return "", "", false
}

// field returns the next space-separated field of s, skipping one leading
// space.
func field(s string) (f, rest string, ok bool) {
	if len(s) < 2 || s[0] != ' ' {
		return "", "", false
	}
	s = s[1:]
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i], s[i:], true
	}
	return s, "", true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
