package logparse

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/keyheat/keyheat/schemas"
)

// JSONConfig names, as dotted paths into each line's object, the fields
// the json parser reads. An empty path means the line has no such field.
// "req.key" reads {"req":{"key":"…"}}.
type JSONConfig struct {
	Key       string `mapstructure:"key"`
	Time      string `mapstructure:"time"`
	Op        string `mapstructure:"op"`
	Bytes     string `mapstructure:"bytes"`
	App       string `mapstructure:"app"`
	Status    string `mapstructure:"status"`
	Client    string `mapstructure:"client"`
	Node      string `mapstructure:"node"`
	LatencyUs string `mapstructure:"latency_us"`
	// TimeFormat reads the time field: auto (default), unix, unix_ms,
	// unix_us, unix_ns, rfc3339 or a Go time layout.
	TimeFormat string `mapstructure:"time_format"`
}

// DefaultJSONConfig reads the field names keyheat itself writes.
func DefaultJSONConfig() JSONConfig {
	return JSONConfig{Key: "key", Time: "time", Op: "op", Bytes: "bytes", App: "app",
		Status: "status", Client: "client", Node: "node", LatencyUs: "latency_us", TimeFormat: TimeAuto}
}

// The fields a JSON line may fill, indexes into jsonNode.field.
const (
	fNone = iota
	fKey
	fTime
	fOp
	fBytes
	fApp
	fStatus
	fClient
	fNode
	fLatency
)

var fieldNames = [...]string{fKey: "key", fTime: "time", fOp: "op", fBytes: "bytes", fApp: "app",
	fStatus: "status", fClient: "client", fNode: "node", fLatency: "latency_us"}

// jsonNode is one level of the path trie: member name to what it holds.
type jsonNode struct {
	field    int
	children map[string]*jsonNode
}

// JSON parses JSON lines: one object per line whose fields are found by
// the configured paths. Unknown members are skipped; a line that is not a
// JSON object, or whose key is absent, null or empty, is rejected. A
// numeric key is used as its text, so {"user": 42} keys "42".
type JSON struct {
	root       jsonNode
	timeFormat string
	app        string
}

var _ Parser = (*JSON)(nil)

// NewJSON returns a JSON-lines parser; app is the app of lines without one.
func NewJSON(cfg JSONConfig, app string) (*JSON, error) {
	if cfg.Key == "" {
		return nil, fmt.Errorf("json: the key field path must be set")
	}
	if err := checkTimeFormat(cfg.TimeFormat); err != nil {
		return nil, fmt.Errorf("json: %w", err)
	}
	p := &JSON{timeFormat: cfg.TimeFormat, app: app}
	paths := [...]string{fKey: cfg.Key, fTime: cfg.Time, fOp: cfg.Op, fBytes: cfg.Bytes, fApp: cfg.App,
		fStatus: cfg.Status, fClient: cfg.Client, fNode: cfg.Node, fLatency: cfg.LatencyUs}
	for f, path := range paths {
		if path == "" || f == fNone {
			continue
		}
		n := &p.root
		for part := range strings.SplitSeq(path, ".") {
			if part == "" {
				return nil, fmt.Errorf("json: %s path %q has an empty segment", fieldNames[f], path)
			}
			if n.field != fNone {
				return nil, fmt.Errorf("json: %s path %q runs through the %s field", fieldNames[f], path, fieldNames[n.field])
			}
			if n.children == nil {
				n.children = map[string]*jsonNode{}
			}
			c := n.children[part]
			if c == nil {
				c = &jsonNode{}
				n.children[part] = c
			}
			n = c
		}
		if n.field != fNone || n.children != nil {
			return nil, fmt.Errorf("json: %s path %q clashes with another field's path", fieldNames[f], path)
		}
		n.field = f
	}
	return p, nil
}

// Name returns "json".
func (*JSON) Name() string { return "json" }

// jsonLine is the state of one Parse: the scanner and what it captured.
type jsonLine struct {
	s    []byte
	src  string // s as a string, converted once: captured values are substrings
	pos  int
	vals [len(fieldNames)]jsonVal
}

type jsonVal struct {
	set  bool
	str  bool   // a string (else a number or literal)
	text string // unescaped string or raw number text
}

const maxDepth = 64

// Parse implements Parser.
func (p *JSON) Parse(line []byte, e *schemas.AccessEvent) error {
	e.Reset()
	var l jsonLine
	l.s = line
	l.src = string(line)
	l.ws()
	if l.pos >= len(l.s) || l.s[l.pos] != '{' {
		return parseErr("json: line is not a JSON object")
	}
	if err := l.object(&p.root, 0); err != nil {
		return err
	}
	l.ws()
	if l.pos != len(l.s) {
		return parseErr("json: data after the object at byte %d", l.pos)
	}
	v := &l.vals
	if !v[fKey].set || v[fKey].text == "" {
		return emptyKey("json: no key at the key path")
	}
	e.Key = v[fKey].text
	e.App = p.app
	if v[fApp].set && v[fApp].text != "" {
		e.App = v[fApp].text
	}
	e.Op, e.Client, e.Node = v[fOp].text, v[fClient].text, v[fNode].text
	if v[fTime].set {
		ms, err := parseTime(v[fTime].text, p.timeFormat)
		if err != nil {
			return parseErr("json: %v", err)
		}
		e.TimeMs = ms
	}
	var err error
	if e.Bytes, err = intVal(&v[fBytes], "bytes"); err != nil {
		return err
	}
	if e.LatencyUs, err = intVal(&v[fLatency], "latency_us"); err != nil {
		return err
	}
	st, err := intVal(&v[fStatus], "status")
	if err != nil {
		return err
	}
	if st < 0 || st > 1<<31-1 {
		return parseErr("json: status %d is out of range", st)
	}
	e.Status = int32(st)
	return nil
}

// intVal reads a number, a numeric string or a float (truncated).
func intVal(v *jsonVal, name string) (int64, error) {
	if !v.set || v.text == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(v.text, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(v.text, 64)
	if err != nil || f != f || f > 9e18 || f < -9e18 {
		return 0, parseErr("json: %s %q is not a number", name, truncate(v.text, 32))
	}
	return int64(f), nil
}

func (l *jsonLine) ws() {
	for l.pos < len(l.s) {
		switch l.s[l.pos] {
		case ' ', '\t', '\r', '\n':
			l.pos++
		default:
			return
		}
	}
}

// object scans the object at l.pos (which is '{'), capturing the members
// node asks for. node may be nil: then the object is only skipped.
func (l *jsonLine) object(node *jsonNode, depth int) error {
	if depth > maxDepth {
		return parseErr("json: nested deeper than %d", maxDepth)
	}
	l.pos++ // '{'
	l.ws()
	if l.pos < len(l.s) && l.s[l.pos] == '}' {
		l.pos++
		return nil
	}
	for {
		l.ws()
		if l.pos >= len(l.s) || l.s[l.pos] != '"' {
			return parseErr("json: expected a member name at byte %d", l.pos)
		}
		start := l.pos
		raw, esc, err := l.str()
		if err != nil {
			return err
		}
		var child *jsonNode
		if node != nil && node.children != nil {
			if esc {
				name, ok := unescape(l.s[start+1 : l.pos-1])
				if !ok {
					return parseErr("json: bad escape in member name")
				}
				child = node.children[name]
			} else {
				child = node.children[string(raw)] // no allocation: map lookup by converted bytes
			}
		}
		l.ws()
		if l.pos >= len(l.s) || l.s[l.pos] != ':' {
			return parseErr("json: expected ':' at byte %d", l.pos)
		}
		l.pos++
		l.ws()
		if err := l.value(child, depth+1); err != nil {
			return err
		}
		l.ws()
		if l.pos >= len(l.s) {
			return parseErr("json: unterminated object")
		}
		switch l.s[l.pos] {
		case ',':
			l.pos++
		case '}':
			l.pos++
			return nil
		default:
			return parseErr("json: expected ',' or '}' at byte %d", l.pos)
		}
	}
}

// value scans one value, capturing it when node names a field.
func (l *jsonLine) value(node *jsonNode, depth int) error {
	if l.pos >= len(l.s) {
		return parseErr("json: missing value")
	}
	capture := node != nil && node.field != fNone
	switch c := l.s[l.pos]; {
	case c == '{':
		if node != nil && node.field == fNone {
			return l.object(node, depth)
		}
		return l.object(nil, depth)
	case c == '[':
		return l.array(depth)
	case c == '"':
		start := l.pos
		raw, esc, err := l.str()
		if err != nil {
			return err
		}
		if capture {
			v := &l.vals[node.field]
			v.set, v.str = true, true
			if esc {
				t, ok := unescape(l.s[start+1 : l.pos-1])
				if !ok {
					return parseErr("json: bad escape in %s", fieldNames[node.field])
				}
				v.text = t
			} else {
				v.text = l.src[start+1 : start+1+len(raw)]
			}
		}
		return nil
	case c == '-' || c >= '0' && c <= '9':
		start := l.pos
		l.pos++
		for l.pos < len(l.s) {
			c := l.s[l.pos]
			if c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
				l.pos++
				continue
			}
			break
		}
		if capture {
			l.vals[node.field] = jsonVal{set: true, text: l.src[start:l.pos]}
		}
		return nil
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if strings.HasPrefix(l.src[l.pos:], lit) {
				l.pos += len(lit)
				if capture && lit != "null" {
					l.vals[node.field] = jsonVal{set: true, text: lit}
				}
				return nil
			}
		}
		return parseErr("json: unexpected %q at byte %d", c, l.pos)
	}
}

func (l *jsonLine) array(depth int) error {
	if depth > maxDepth {
		return parseErr("json: nested deeper than %d", maxDepth)
	}
	l.pos++ // '['
	l.ws()
	if l.pos < len(l.s) && l.s[l.pos] == ']' {
		l.pos++
		return nil
	}
	for {
		l.ws()
		if err := l.value(nil, depth+1); err != nil {
			return err
		}
		l.ws()
		if l.pos >= len(l.s) {
			return parseErr("json: unterminated array")
		}
		switch l.s[l.pos] {
		case ',':
			l.pos++
		case ']':
			l.pos++
			return nil
		default:
			return parseErr("json: expected ',' or ']' at byte %d", l.pos)
		}
	}
}

// str scans the string at l.pos ('"') and returns its raw content and
// whether it has escapes. Control characters are rejected as JSON demands.
func (l *jsonLine) str() (raw []byte, escaped bool, err error) {
	start := l.pos + 1
	for i := start; i < len(l.s); i++ {
		switch c := l.s[i]; {
		case c == '"':
			l.pos = i + 1
			return l.s[start:i], escaped, nil
		case c == '\\':
			escaped = true
			i++
		case c < 0x20:
			return nil, false, parseErr("json: control character in string at byte %d", i)
		}
	}
	return nil, false, parseErr("json: unterminated string")
}

// unescape decodes a JSON string body with escapes. Invalid UTF-8 is kept
// as is, so the key check downstream can reject it with its own reason.
func unescape(b []byte) (string, bool) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(b) {
			return "", false
		}
		switch b[i] {
		case '"', '\\', '/':
			out = append(out, b[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(b[i+1:])
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+2 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					if x, ok := hex4(b[i+3:]); ok {
						r2 = x
					}
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return string(out), true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
