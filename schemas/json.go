package schemas

import (
	"math"
	"strconv"
	"time"
	"unsafe"
)

// AppendJSON appends e to dst as one JSON object and returns the extended
// buffer.
//
// The JSON wire format of an AccessEvent is one object per record:
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
//
// Fields are written in the order above; zero-valued optional fields (all
// but ts and key) are omitted.
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
//     are skipped whatever their value (nested objects and arrays, up to
//     512 levels deep);
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

// Field numbers for decodeJSON's dispatch: the string fields first (they
// index spans), then the numbers.
const (
	fTs = numStringFields + iota
	fBytes
	fStatus
	fLatUs
	fUnknown
)

func fieldOf(name string) int {
	switch name {
	case "ts":
		return fTs
	case "key":
		return sfKey
	case "app":
		return sfApp
	case "op":
		return sfOp
	case "bytes":
		return fBytes
	case "status":
		return fStatus
	case "client":
		return sfClient
	case "node":
		return sfNode
	case "lat_us":
		return fLatUs
	}
	return fUnknown
}

// decodeJSON is written as one loop over a local position, with inline
// fast paths for what producers actually write (compact JSON, plain ASCII
// names and strings, small integers). Anything else (whitespace, escapes,
// non-ASCII, fractions, null, unknown members) hands the position to the
// general jsonScanner methods and takes it back. Flattening the common path
// cut the cost by about a third against calling a method per token.
func decodeJSON(src []byte, e *AccessEvent) error {
	s := jsonScanner{src: src}
	var spans [numStringFields]strSpan
	var nums [4]int64 // ts, bytes, status, lat_us, indexed by f - fTs
	n := len(src)

	if err := s.expect('{', "expected '{' to start an event object"); err != nil {
		return parseError(err)
	}
	s.skipWS()
	pos := s.pos
	if pos < n && src[pos] == '}' {
		pos++
	} else {
		for {
			// Member name.
			if pos < n && src[pos] <= ' ' {
				s.pos = pos
				s.skipWSSlow()
				pos = s.pos
			}
			var name string
			if i := skipPlain(src, pos+1); pos < n && src[pos] == '"' && i < n && src[i] == '"' {
				name = unsafe.String(unsafe.SliceData(src[pos+1:]), i-(pos+1))
				pos = i + 1
				if pos < n && src[pos] == ':' {
					pos++
				} else {
					s.pos = pos
					if err := s.expect(':', "expected ':' after object member name"); err != nil {
						return parseError(err)
					}
					pos = s.pos
				}
				if pos < n && src[pos] <= ' ' {
					s.pos = pos
					s.skipWSSlow()
					pos = s.pos
				}
			} else {
				s.pos = pos
				var err error
				if name, err = s.memberName(); err != nil {
					return parseError(err)
				}
				pos = s.pos
			}

			// Member value.
			f := fieldOf(name)
			var err error
			switch {
			case f < numStringFields:
				if pos < n && src[pos] == '"' {
					if i := skipPlain(src, pos+1); i < n && src[i] == '"' {
						spans[f] = strSpan{start: pos + 1, end: i, set: true}
						pos = i + 1
						break
					}
				}
				s.pos = pos
				spans[f], err = s.stringValue(name)
				pos = s.pos
			case f < fUnknown:
				// Inline smallInt: at most 18 digits cannot overflow.
				i := pos
				neg := i < n && src[i] == '-'
				if neg {
					i++
				}
				start := i
				var v int64
				for i < n && isDigit(src[i]) {
					v = v*10 + int64(src[i]-'0')
					i++
				}
				if d := i - start; d > 0 && d <= 18 && (d == 1 || src[start] != '0') &&
					(i == n || (src[i] != '.' && src[i]|0x20 != 'e')) &&
					(f != fStatus || v <= math.MaxInt32) {
					if neg {
						v = -v
					}
					nums[f-fTs] = v
					pos = i
					break
				}
				s.pos = pos
				switch f {
				case fTs:
					nums[0], err = s.timeValue()
				case fStatus:
					nums[f-fTs], err = s.intValue(name, math.MinInt32, math.MaxInt32)
				default:
					nums[f-fTs], err = s.intValue(name, math.MinInt64, math.MaxInt64)
				}
				pos = s.pos
			default:
				s.pos = pos
				err = s.skipValue(0)
				pos = s.pos
			}
			if err != nil {
				return parseError(err)
			}

			// ',' or '}'.
			if pos < n && src[pos] == ',' {
				pos++
				continue
			}
			if pos < n && src[pos] == '}' {
				pos++
				break
			}
			s.pos = pos
			done, err := s.endMember()
			if err != nil {
				return parseError(err)
			}
			pos = s.pos
			if done {
				break
			}
		}
	}
	s.pos = pos
	if err := s.end(); err != nil {
		return parseError(err)
	}
	ts, nbytes, status, lat := nums[0], nums[1], int32(nums[2]), nums[3]

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
	// Field by field, as decodeBinary does: no temporary struct to copy.
	e.TimeMs = ts
	e.Key = bufString(buf, 0, ends[sfKey])
	e.App = bufString(buf, ends[sfKey], ends[sfApp])
	e.Op = bufString(buf, ends[sfApp], ends[sfOp])
	e.Bytes = nbytes
	e.Status = status
	e.Client = bufString(buf, ends[sfOp], ends[sfClient])
	e.Node = bufString(buf, ends[sfClient], ends[sfNode])
	e.LatencyUs = lat
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
	if v, ok := s.smallInt(); ok {
		if v < min || v > max {
			return 0, s.fail("number out of range")
		}
		return v, nil
	}
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

// smallInt is intValue's fast path: a plain integer of at most 18 digits,
// which cannot overflow, consumed in one pass. Anything else (fraction,
// exponent, leading zero, long or malformed) leaves the position alone and
// returns ok=false for the general path to handle or reject.
func (s *jsonScanner) smallInt() (v int64, ok bool) {
	src := s.src
	i := s.pos
	neg := i < len(src) && src[i] == '-'
	if neg {
		i++
	}
	start := i
	for i < len(src) && isDigit(src[i]) {
		v = v*10 + int64(src[i]-'0')
		i++
	}
	n := i - start
	if n == 0 || n > 18 || (n > 1 && src[start] == '0') {
		return 0, false
	}
	if i < len(src) && (src[i] == '.' || src[i] == 'e' || src[i] == 'E') {
		return 0, false
	}
	s.pos = i
	if neg {
		v = -v
	}
	return v, true
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
