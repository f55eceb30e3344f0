package logparse

import (
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/keyheat/keyheat/internal/jsonscan"
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

// jsonNode is one level of the path trie: a field, or the members that
// lead to fields. A node has a handful of children, so a linear scan by
// name beats a map (hashing each member name cost a third of Parse).
type jsonNode struct {
	field    int
	children []jsonChild
}

type jsonChild struct {
	name string
	node *jsonNode
}

// child returns the child called name, or nil.
func (n *jsonNode) child(name string) *jsonNode {
	for i := range n.children {
		if c := &n.children[i]; c.name == name {
			return c.node
		}
	}
	return nil
}

// JSON parses JSON lines: one object per line whose fields are found by
// the configured paths. The whole line must be JSON (RFC 8259, checked by
// the same scanner that decodes keyheat's own records); unknown members
// are skipped, however deeply nested, up to 512 levels. A line whose key is
// absent, null, empty or not a scalar is rejected; a numeric key is used as
// its text, so {"user": 42} keys "42", and a key that is not UTF-8 (raw
// bytes or a lone \ud800 escape) is rejected with ReasonKeyNotUTF8 rather
// than replaced, which would merge distinct keys. In the other string
// fields such bytes become U+FFFD.
//
// Numeric fields take numbers (fractions and exponents truncate) or
// strings holding one ("2048"); a string field takes a string, or a number
// or true/false as its text. A field whose value does not fit
// ("status":"HIT", "bytes":"12k", "op":{…}, a status outside int32 or
// negative) is dropped and reported, see Parser. null and "" mean absent,
// and when a path repeats the last value wins.
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
			c := n.child(part)
			if c == nil {
				c = &jsonNode{}
				n.children = append(n.children, jsonChild{name: part, node: c})
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

// What a line holds at one field's path.
const (
	valNone    = iota // absent or null
	valString         // a string: Src[start:end] is its raw content
	valNumber         // a number: Src[start:end] is its text
	valLiteral        // true or false: Src[start:end] is the word
	valOther          // an object or an array
)

type jsonVal struct {
	kind       uint8
	flags      jsonscan.Flags // of a string
	isInt      bool           // of a number
	start, end int
}

// Parse implements Parser.
func (p *JSON) Parse(dst []schemas.AccessEvent, line []byte) ([]schemas.AccessEvent, Fields, error) {
	var vals [len(fieldNames)]jsonVal
	s := jsonscan.Scanner{Src: line}
	s.SkipWS()
	if s.Peek() != '{' {
		return dst, 0, parseErr("json: line is not a JSON object")
	}
	if err := p.object(&s, &p.root, &vals, 0); err != nil {
		return dst, 0, parseErr("json: %v", err)
	}
	if err := s.End(); err != nil {
		return dst, 0, parseErr("json: %v", err)
	}
	if k := vals[fKey]; k.kind == valNone || k.kind == valOther || k.start == k.end {
		return dst, 0, emptyKey("json: no key at the key path")
	}

	var e schemas.AccessEvent
	var dropped Fields
	if t := &vals[fTime]; t.kind != valNone {
		ms, err := parseTime(p.text(line, t), p.timeFormat)
		if err != nil {
			return dst, 0, parseErr("json: %v", err)
		}
		e.TimeMs = ms
	}
	var ok bool
	if e.Bytes, ok = intVal(line, &vals[fBytes], math.MinInt64, math.MaxInt64); !ok {
		dropped |= FieldBytes
	}
	if e.LatencyUs, ok = intVal(line, &vals[fLatency], math.MinInt64, math.MaxInt64); !ok {
		dropped |= FieldLatencyUs
	}
	st, ok := intVal(line, &vals[fStatus], 0, math.MaxInt32)
	if !ok {
		dropped |= FieldStatus
	}
	e.Status = int32(st)

	// One allocation for all strings, as schemas.DecodeJSON does: the raw
	// spans' total length bounds the decoded length except when invalid
	// UTF-8 is replaced (1 byte becomes 3); append then grows buf, which is
	// correct because the strings are made only once buf is final.
	strFields := [...]int{fKey, fApp, fOp, fClient, fNode}
	total := 0
	for _, f := range strFields {
		switch v := &vals[f]; v.kind {
		case valString, valNumber, valLiteral:
			total += v.end - v.start
		case valOther:
			dropped |= 1 << f
		}
	}
	buf := make([]byte, 0, total)
	var ends [len(strFields)]int
	for i, f := range strFields {
		switch v := &vals[f]; v.kind {
		case valString:
			buf, ok = jsonscan.AppendUnescaped(buf, line[v.start:v.end], v.flags, f == fKey)
			if !ok {
				return dst, 0, &schemas.InvalidEventError{Reason: schemas.ReasonKeyNotUTF8,
					Detail: "json: key is not valid UTF-8 (invalid bytes or a lone surrogate escape)"}
			}
		case valNumber, valLiteral:
			buf = append(buf, line[v.start:v.end]...)
		}
		ends[i] = len(buf)
	}
	e.Key = bufString(buf, 0, ends[0])
	e.App = bufString(buf, ends[0], ends[1])
	e.Op = bufString(buf, ends[1], ends[2])
	e.Client = bufString(buf, ends[2], ends[3])
	e.Node = bufString(buf, ends[3], ends[4])
	if e.Key == "" {
		return dst, 0, emptyKey("json: no key at the key path")
	}
	if e.App == "" {
		e.App = p.app
	}
	return append(dst, e), dropped, nil
}

// object scans the object at s.Pos (which is '{'), capturing the members
// node's paths lead to. depth is the nesting level of its members' values.
func (p *JSON) object(s *jsonscan.Scanner, node *jsonNode, vals *[len(fieldNames)]jsonVal, depth int) error {
	s.Pos++ // '{'
	s.SkipWS()
	if s.Peek() == '}' {
		s.Pos++
		return nil
	}
	for {
		name, err := s.MemberName()
		if err != nil {
			return err
		}
		child := node.child(name) // name aliases the line: compared, never kept
		switch {
		case child == nil:
			err = s.SkipValue(depth)
		case child.field == fNone: // a path runs through this member
			if s.Peek() != '{' {
				err = s.SkipValue(depth)
			} else if depth >= jsonscan.MaxDepth {
				err = s.Fail("nesting too deep")
			} else {
				err = p.object(s, child, vals, depth+1)
			}
		default:
			err = capture(s, &vals[child.field], depth)
		}
		if err != nil {
			return err
		}
		done, err := s.EndMember()
		if err != nil || done {
			return err
		}
	}
}

// capture scans the value at s.Pos into v.
func capture(s *jsonscan.Scanner, v *jsonVal, depth int) error {
	switch c := s.Peek(); {
	case c == '"':
		sp, err := s.String()
		*v = jsonVal{kind: valString, flags: sp.Flags, start: sp.Start, end: sp.End}
		return err
	case c == '-' || jsonscan.IsDigit(c):
		n, err := s.Number()
		*v = jsonVal{kind: valNumber, isInt: n.IsInt, start: n.Start, end: n.End}
		return err
	case c == 't' || c == 'f':
		start := s.Pos
		word := "true"
		if c == 'f' {
			word = "false"
		}
		err := s.Literal(word)
		*v = jsonVal{kind: valLiteral, start: start, end: s.Pos}
		return err
	case c == 'n':
		*v = jsonVal{}
		return s.Literal("null")
	}
	*v = jsonVal{kind: valOther}
	return s.SkipValue(depth)
}

// text returns v's text for parsing on the spot (not for keeping: it may
// alias line).
func (p *JSON) text(line []byte, v *jsonVal) string {
	raw := line[v.start:v.end]
	if v.kind == valString && v.flags&jsonscan.Escaped != 0 {
		b, _ := jsonscan.AppendUnescaped(nil, raw, v.flags, false)
		return string(b)
	}
	return unsafe.String(unsafe.SliceData(raw), len(raw))
}

// intVal reads a numeric field in [min, max]: a number (a fraction or
// exponent truncates) or a string holding one. ok is false when the field
// is present but is not such a number; absent, null and "" give 0.
func intVal(line []byte, v *jsonVal, min, max int64) (n int64, ok bool) {
	var s jsonscan.Scanner
	var num jsonscan.Number
	switch v.kind {
	case valNone:
		return 0, true
	case valNumber:
		s = jsonscan.Scanner{Src: line}
		num = jsonscan.Number{Start: v.start, End: v.end, IsInt: v.isInt}
	case valString:
		raw := line[v.start:v.end]
		if v.flags != 0 {
			raw, _ = jsonscan.AppendUnescaped(nil, raw, v.flags, false)
		}
		if len(raw) == 0 {
			return 0, true
		}
		s = jsonscan.Scanner{Src: raw}
		var err error
		if num, err = s.Number(); err != nil || s.Pos != len(raw) {
			return 0, false
		}
	default:
		return 0, false
	}
	n, err := s.Int64(num, min, max)
	return n, err == nil
}

// bufString returns buf[i:j] as a string without copying. buf must never be
// written again: Parse allocates it, fills it, and then only hands out
// strings over it.
func bufString(buf []byte, i, j int) string {
	if j <= i {
		return ""
	}
	return unsafe.String(&buf[i], j-i)
}
