package schemas

import (
	"math"
	"strconv"
	"unsafe"

	"github.com/keyheat/keyheat/internal/jsonscan"
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
	s := jsonscan.Scanner{Src: src}
	var spans [numStringFields]jsonscan.Span
	var nums [4]int64 // ts, bytes, status, lat_us, indexed by f - fTs
	n := len(src)

	if err := s.Expect('{', "expected '{' to start an event object"); err != nil {
		return parseError(err)
	}
	s.SkipWS()
	pos := s.Pos
	if pos < n && src[pos] == '}' {
		pos++
	} else {
		for {
			// Member name.
			if pos < n && src[pos] <= ' ' {
				s.Pos = pos
				s.SkipWS()
				pos = s.Pos
			}
			var name string
			if i := jsonscan.SkipPlain(src, pos+1); pos < n && src[pos] == '"' && i < n && src[i] == '"' {
				name = unsafe.String(unsafe.SliceData(src[pos+1:]), i-(pos+1))
				pos = i + 1
				if pos < n && src[pos] == ':' {
					pos++
				} else {
					s.Pos = pos
					if err := s.Expect(':', "expected ':' after object member name"); err != nil {
						return parseError(err)
					}
					pos = s.Pos
				}
				if pos < n && src[pos] <= ' ' {
					s.Pos = pos
					s.SkipWS()
					pos = s.Pos
				}
			} else {
				s.Pos = pos
				var err error
				if name, err = s.MemberName(); err != nil {
					return parseError(err)
				}
				pos = s.Pos
			}

			// Member value.
			f := fieldOf(name)
			var err error
			switch {
			case f < numStringFields:
				if pos < n && src[pos] == '"' {
					if i := jsonscan.SkipPlain(src, pos+1); i < n && src[i] == '"' {
						spans[f] = jsonscan.Span{Start: pos + 1, End: i, Set: true}
						pos = i + 1
						break
					}
				}
				s.Pos = pos
				spans[f], err = stringValue(&s, name)
				pos = s.Pos
			case f < fUnknown:
				// Inline smallInt: at most 18 digits cannot overflow.
				i := pos
				neg := i < n && src[i] == '-'
				if neg {
					i++
				}
				start := i
				var v int64
				for i < n && jsonscan.IsDigit(src[i]) {
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
				s.Pos = pos
				switch f {
				case fTs:
					nums[0], err = timeValue(&s)
				case fStatus:
					nums[f-fTs], err = intValue(&s, name, math.MinInt32, math.MaxInt32)
				default:
					nums[f-fTs], err = intValue(&s, name, math.MinInt64, math.MaxInt64)
				}
				pos = s.Pos
			default:
				s.Pos = pos
				err = s.SkipValue(0)
				pos = s.Pos
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
			s.Pos = pos
			done, err := s.EndMember()
			if err != nil {
				return parseError(err)
			}
			pos = s.Pos
			if done {
				break
			}
		}
	}
	s.Pos = pos
	if err := s.End(); err != nil {
		return parseError(err)
	}
	ts, nbytes, status, lat := nums[0], nums[1], int32(nums[2]), nums[3]

	// One allocation for all strings. The raw spans' total length is an
	// upper bound for the decoded length except when invalid UTF-8 is
	// replaced (1 byte becomes 3); append then grows buf, which is correct
	// because the strings are made only once buf is final.
	total := 0
	for _, sp := range spans {
		total += sp.End - sp.Start
	}
	var buf []byte
	if total > 0 {
		buf = make([]byte, 0, total)
	}
	var ends [numStringFields]int
	for i, sp := range spans {
		if sp.End > sp.Start {
			var ok bool
			buf, ok = jsonscan.AppendUnescaped(buf, src[sp.Start:sp.End], sp.Flags, i == sfKey)
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
