package schemas

import (
	"math"
	"strconv"
	"time"
	"unsafe"
)

// JSON wire format of an AccessEvent, one object per record:
//
//	{"ts":1767225600123,"key":"user:42:profile","app":"shop","op":"GET",
//	 "bytes":512,"status":200,"client":"10.1.2.3","node":"redis-3","lat_us":870}
//
//	name    field      JSON type
//	ts      TimeMs     number, Unix milliseconds (always written)
//	key     Key        string (always written)
//	app     App        string
//	op      Op         string
//	bytes   Bytes      number
//	status  Status     number (int32)
//	client  Client     string
//	node    Node       string
//	lat_us  LatencyUs  number, microseconds
//
// The names are short because they repeat in every record, and stable
// because producers outside keyheat write them.

// AppendJSON appends e to dst as one JSON object and returns the extended
// buffer. Fields are written in the order above; zero-valued optional fields
// (all but ts and key) are omitted.
//
// JSON text is UTF-8, so a Key (or any string) that is not valid UTF-8
// cannot be carried: each invalid byte is written as \ufffd, as
// encoding/json does, and the key reads back different. Limits.Validate
// rejects such keys before they reach a JSON producer (ReasonKeyNotUTF8);
// use the binary codec when keys are binary.
func AppendJSON(dst []byte, e *AccessEvent) []byte {
	dst = append(dst, `{"ts":`...)
	dst = strconv.AppendInt(dst, e.TimeMs, 10)
	dst = append(dst, `,"key":`...)
	dst = appendQuoted(dst, e.Key)
	if e.App != "" {
		dst = append(dst, `,"app":`...)
		dst = appendQuoted(dst, e.App)
	}
	if e.Op != "" {
		dst = append(dst, `,"op":`...)
		dst = appendQuoted(dst, e.Op)
	}
	if e.Bytes != 0 {
		dst = append(dst, `,"bytes":`...)
		dst = strconv.AppendInt(dst, e.Bytes, 10)
	}
	if e.Status != 0 {
		dst = append(dst, `,"status":`...)
		dst = strconv.AppendInt(dst, int64(e.Status), 10)
	}
	if e.Client != "" {
		dst = append(dst, `,"client":`...)
		dst = appendQuoted(dst, e.Client)
	}
	if e.Node != "" {
		dst = append(dst, `,"node":`...)
		dst = appendQuoted(dst, e.Node)
	}
	if e.LatencyUs != 0 {
		dst = append(dst, `,"lat_us":`...)
		dst = strconv.AppendInt(dst, e.LatencyUs, 10)
	}
	return append(dst, '}')
}

// The string fields of an event, in the order their spans are kept.
const (
	sfKey = iota
	sfApp
	sfOp
	sfClient
	sfNode
	numStringFields
)

// DecodeJSON decodes one JSON object (see AppendJSON for the format) into e,
// overwriting every field. It is lenient where producers differ and strict
// where the input is not JSON:
//
//   - members may come in any order and with any whitespace; unknown members
//     are skipped whatever their value (nested objects and arrays included);
//     when a name repeats, the last one wins; names are case-sensitive;
//   - strings may use every JSON escape, \uXXXX and surrogate pairs included;
//     in app, op, client and node, bytes that are not UTF-8 and lone
//     surrogates become U+FFFD (as in encoding/json), but in key they are
//     rejected with ReasonKeyNotUTF8, because replacing them would merge
//     distinct keys into one;
//   - numbers may have a fraction or exponent (1.5e3) and are truncated
//     toward zero; "ts" may also be a string holding decimal Unix ms or an
//     RFC 3339 time; null for any known member means "absent";
//   - a missing "key" is not a decoding error: e.Key is empty and
//     Limits.Validate reports ReasonEmptyKey, so the record still reaches
//     the dead-letter topic with the right reason. A missing "ts" leaves
//     TimeMs 0 (ReasonMissingTime from Validate).
//
// Anything else (invalid JSON, trailing data, a known member of the wrong
// type, a number out of range) returns an *InvalidEventError with
// ReasonParse. On error e is reset.
//
// The decoded strings do not alias src, which the caller may reuse. They
// share one freshly allocated backing array (one allocation per event), so
// keeping any one of them alive keeps all of the event's string bytes
// alive; clone a field with strings.Clone if it outlives the event by long
// and the rest is large.
func DecodeJSON(src []byte, e *AccessEvent) error {
	if err := decodeJSON(src, e); err != nil {
		e.Reset()
		return err
	}
	return nil
}

func decodeJSON(src []byte, e *AccessEvent) error {
	s := jsonScanner{src: src}
	var spans [numStringFields]strSpan
	var ts, nbytes, lat int64
	var status int32

	if err := s.expect('{', "expected '{' to start an event object"); err != nil {
		return parseError(err)
	}
	s.skipWS()
	if s.peek() == '}' {
		s.pos++
	} else {
		for {
			name, err := s.memberName()
			if err != nil {
				return parseError(err)
			}
			switch name {
			case "ts":
				ts, err = s.timeValue()
			case "key":
				spans[sfKey], err = s.stringValue("key")
			case "app":
				spans[sfApp], err = s.stringValue("app")
			case "op":
				spans[sfOp], err = s.stringValue("op")
			case "client":
				spans[sfClient], err = s.stringValue("client")
			case "node":
				spans[sfNode], err = s.stringValue("node")
			case "bytes":
				nbytes, err = s.intValue("bytes", math.MinInt64, math.MaxInt64)
			case "status":
				var v int64
				v, err = s.intValue("status", math.MinInt32, math.MaxInt32)
				status = int32(v)
			case "lat_us":
				lat, err = s.intValue("lat_us", math.MinInt64, math.MaxInt64)
			default:
				err = s.skipValue(0)
			}
			if err != nil {
				return parseError(err)
			}
			done, err := s.endMember()
			if err != nil {
				return parseError(err)
			}
			if done {
				break
			}
		}
	}
	if err := s.end(); err != nil {
		return parseError(err)
	}

	// One allocation for all strings. The raw spans' total length is an
	// upper bound for the decoded length except when invalid UTF-8 is
	// replaced (1 byte becomes 3); append then grows buf, which is correct
	// because the strings are made only once buf is final.
	total := 0
	for _, sp := range spans {
		total += sp.end - sp.start
	}
	var buf []byte
	if total > 0 {
		buf = make([]byte, 0, total)
	}
	var ends [numStringFields]int
	for i, sp := range spans {
		if sp.end > sp.start {
			var ok bool
			buf, ok = appendUnescaped(buf, src[sp.start:sp.end], sp.flags, i == sfKey)
			if !ok {
				return &InvalidEventError{Reason: ReasonKeyNotUTF8,
					Detail: "key is not valid UTF-8 (invalid bytes or a lone surrogate escape)"}
			}
		}
		ends[i] = len(buf)
	}
	*e = AccessEvent{
		TimeMs:    ts,
		Key:       bufString(buf, 0, ends[sfKey]),
		App:       bufString(buf, ends[sfKey], ends[sfApp]),
		Op:        bufString(buf, ends[sfApp], ends[sfOp]),
		Bytes:     nbytes,
		Status:    status,
		Client:    bufString(buf, ends[sfOp], ends[sfClient]),
		Node:      bufString(buf, ends[sfClient], ends[sfNode]),
		LatencyUs: lat,
	}
	return nil
}

// bufString returns buf[i:j] as a string without copying. buf must never be
// written again: the decoders allocate it, fill it, and then only hand out
// strings over it.
func bufString(buf []byte, i, j int) string {
	if j <= i {
		return ""
	}
	return unsafe.String(&buf[i], j-i)
}

func parseError(err error) error {
	return &InvalidEventError{Reason: ReasonParse, Detail: err.Error()}
}

// stringValue scans the value of a string member; null gives an unset span.
func (s *jsonScanner) stringValue(name string) (strSpan, error) {
	switch s.peek() {
	case '"':
		return s.scanString()
	case 'n':
		return strSpan{}, s.literal("null")
	}
	return strSpan{}, s.fail(`"` + name + `" must be a string`)
}

// intValue scans the value of an integer member; null gives 0.
func (s *jsonScanner) intValue(name string, min, max int64) (int64, error) {
	switch c := s.peek(); {
	case c == '-' || isDigit(c):
		ns, err := s.scanNumber()
		if err != nil {
			return 0, err
		}
		return s.int64Of(ns, min, max)
	case c == 'n':
		return 0, s.literal("null")
	}
	return 0, s.fail(`"` + name + `" must be a number`)
}

// timeValue scans "ts": a number of Unix ms, null, or a string holding
// either decimal Unix ms or an RFC 3339 time (for hand-written records).
func (s *jsonScanner) timeValue() (int64, error) {
	if s.peek() != '"' {
		return s.intValue("ts", math.MinInt64, math.MaxInt64)
	}
	at := s.pos
	sp, err := s.scanString()
	if err != nil {
		return 0, err
	}
	raw := s.src[sp.start:sp.end]
	if sp.flags == 0 && len(raw) > 0 {
		str := unsafe.String(&raw[0], len(raw))
		if v, err := strconv.ParseInt(str, 10, 64); err == nil {
			return v, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, str); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, &jsonSyntaxError{msg: `"ts" string is neither Unix milliseconds nor an RFC 3339 time`, off: at}
}
