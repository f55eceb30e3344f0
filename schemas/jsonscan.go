package schemas

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file holds the small JSON scanner shared by the event and the
// dead-letter decoders. It is hand-written for one reason: decoding an
// AccessEvent runs once per record on the hot path, and encoding/json
// costs nine allocations and about ten times as long on a typical event. The scanner
// validates everything it passes over (RFC 8259 grammar, including values of
// unknown fields), so "decoded without error" means "was JSON".
//
// The scanner makes strings over the input with unsafe.String (member names,
// number text) only to compare or parse them on the spot; none of them is
// stored or returned, because the input belongs to the caller.

// maxJSONDepth bounds the nesting of skipped values so that a record of a
// million '[' cannot exhaust the stack.
const maxJSONDepth = 512

// jsonSyntaxError says what was wrong with JSON input and where. The public
// decoders turn it into their own error types.
type jsonSyntaxError struct {
	msg string
	off int
}

func (e *jsonSyntaxError) Error() string {
	return e.msg + " at offset " + strconv.Itoa(e.off)
}

// strFlags describe a scanned string's raw bytes, so the common case (plain
// ASCII) can be copied without a second look.
type strFlags uint8

const (
	strEscaped  strFlags = 1 << iota // contains backslash escapes
	strNonASCII                      // contains bytes >= 0x80 (maybe invalid UTF-8)
)

// strSpan is the raw content of a JSON string, between its quotes.
type strSpan struct {
	start, end int
	flags      strFlags
	set        bool // the field was present with a string value
}

type jsonScanner struct {
	src []byte
	pos int
}

func (s *jsonScanner) fail(msg string) error {
	return &jsonSyntaxError{msg: msg, off: s.pos}
}

func (s *jsonScanner) skipWS() {
	if s.pos < len(s.src) && s.src[s.pos] > ' ' { // compact JSON: nothing to skip
		return
	}
	s.skipWSSlow()
}

func (s *jsonScanner) skipWSSlow() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next byte, or 0 at the end of input (0 never starts a
// JSON token, so callers treat it as "unexpected").
func (s *jsonScanner) peek() byte {
	if s.pos < len(s.src) {
		return s.src[s.pos]
	}
	return 0
}

// expect consumes c after optional whitespace.
func (s *jsonScanner) expect(c byte, msg string) error {
	s.skipWS()
	if s.peek() != c {
		return s.fail(msg)
	}
	s.pos++
	return nil
}

// endMember is called after a member's value: it consumes ',' (returning
// false, more members follow) or '}' (returning true).
func (s *jsonScanner) endMember() (done bool, err error) {
	s.skipWS()
	switch s.peek() {
	case ',':
		s.pos++
		return false, nil
	case '}':
		s.pos++
		return true, nil
	}
	return false, s.fail("expected ',' or '}' after object member")
}

// end checks that only whitespace follows the top-level value.
func (s *jsonScanner) end() error {
	s.skipWS()
	if s.pos != len(s.src) {
		return s.fail("unexpected data after top-level value")
	}
	return nil
}

// Byte classes inside a JSON string; see scanString.
const (
	chPlain    = iota // printable ASCII other than '"' and '\\'
	chQuote           // '"'
	chEscape          // '\\'
	chControl         // < 0x20, not allowed raw
	chNonASCII        // >= 0x80, part of a (maybe invalid) UTF-8 sequence
)

var strClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c < 0x20:
			t[c] = chControl
		case c == '"':
			t[c] = chQuote
		case c == '\\':
			t[c] = chEscape
		case c >= utf8.RuneSelf:
			t[c] = chNonASCII
		}
	}
	return t
}()

// scanString consumes a string starting at the current '"' and returns its
// raw span. Escapes are checked for syntax but not decoded.
func (s *jsonScanner) scanString() (strSpan, error) {
	src := s.src
	i := s.pos + 1 // past the opening quote
	sp := strSpan{start: i, set: true}
	for {
		i = skipPlain(src, i)
		if i >= len(src) {
			s.pos = len(src)
			return sp, s.fail("unterminated string")
		}
		switch strClass[src[i]] {
		case chQuote:
			sp.end = i
			s.pos = i + 1
			return sp, nil
		case chNonASCII:
			sp.flags |= strNonASCII
			i++
		case chControl:
			s.pos = i
			return sp, s.fail("control character in string")
		case chEscape:
			sp.flags |= strEscaped
			if i+1 >= len(src) {
				s.pos = len(src)
				return sp, s.fail("unterminated string")
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(src) || !isHex4(src[i+2:i+6]) {
					s.pos = i
					return sp, s.fail(`invalid \u escape in string`)
				}
				i += 6
			default:
				s.pos = i
				return sp, s.fail("invalid escape in string")
			}
		}
	}
}

// skipPlain returns the index of the first byte at or after i that is not
// chPlain (or len(src)). A table lookup per byte measured twice as fast as
// testing eight bytes at a time (SWAR): event strings are short.
func skipPlain(src []byte, i int) int {
	for i < len(src) && strClass[src[i]] == chPlain {
		i++
	}
	return i
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if hexVal(c) < 0 {
			return false
		}
	}
	return true
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// numSpan is the raw text of a JSON number.
type numSpan struct {
	start, end int
	isInt      bool // no fraction and no exponent
}

// scanNumber consumes a number per the RFC 8259 grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) scanNumber() (numSpan, error) {
	src := s.src
	i := s.pos
	ns := numSpan{start: i, isInt: true}
	if i < len(src) && src[i] == '-' {
		i++
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && '1' <= src[i] && src[i] <= '9':
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	default:
		s.pos = i
		return ns, s.fail("invalid number")
	}
	if i < len(src) && src[i] == '.' {
		ns.isInt = false
		i++
		if i >= len(src) || !isDigit(src[i]) {
			s.pos = i
			return ns, s.fail("invalid number: digit expected after '.'")
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		ns.isInt = false
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || !isDigit(src[i]) {
			s.pos = i
			return ns, s.fail("invalid number: digit expected in exponent")
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	ns.end = i
	s.pos = i
	return ns, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// int64Of converts a scanned number to an int64. Numbers with a fraction or
// an exponent (1.5e3, as JavaScript producers write) are truncated toward
// zero; values outside [min, max] are an error.
func (s *jsonScanner) int64Of(ns numSpan, min, max int64) (int64, error) {
	txt := s.src[ns.start:ns.end]
	if ns.isInt {
		neg := txt[0] == '-'
		if neg {
			txt = txt[1:]
		}
		if len(txt) <= 18 { // cannot overflow: fast path for every realistic value
			var v int64
			for _, c := range txt {
				v = v*10 + int64(c-'0')
			}
			if neg {
				v = -v
			}
			if v < min || v > max {
				return 0, &jsonSyntaxError{msg: "number out of range", off: ns.start}
			}
			return v, nil
		}
	}
	str := unsafe.String(unsafe.SliceData(s.src[ns.start:]), ns.end-ns.start)
	if ns.isInt {
		v, err := strconv.ParseInt(str, 10, 64)
		if err != nil || v < min || v > max {
			return 0, &jsonSyntaxError{msg: "number out of range", off: ns.start}
		}
		return v, nil
	}
	f, err := strconv.ParseFloat(str, 64)
	// ParseFloat reports underflow (1e-400) as an error with f = 0, which is
	// fine here; overflow gives ±Inf. float64(math.MaxInt64) rounds up to
	// 2^63, so ">= max+1" is the exact bound for every max used here.
	if (err != nil && math.IsInf(f, 0)) || f < float64(min) || f >= float64(max)+1 {
		return 0, &jsonSyntaxError{msg: "number out of range", off: ns.start}
	}
	return int64(f), nil
}

// literal consumes true, false or null.
func (s *jsonScanner) literal(word string) error {
	if len(s.src)-s.pos < len(word) || string(s.src[s.pos:s.pos+len(word)]) != word {
		return s.fail("invalid literal")
	}
	s.pos += len(word)
	return nil
}

// skipValue consumes any JSON value, validating it. The caller has skipped
// leading whitespace.
func (s *jsonScanner) skipValue(depth int) error {
	switch c := s.peek(); {
	case c == '"':
		_, err := s.scanString()
		return err
	case c == '-' || isDigit(c):
		_, err := s.scanNumber()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '{':
		if depth >= maxJSONDepth {
			return s.fail("nesting too deep")
		}
		s.pos++
		s.skipWS()
		if s.peek() == '}' {
			s.pos++
			return nil
		}
		for {
			s.skipWS()
			if s.peek() != '"' {
				return s.fail("expected string for object member name")
			}
			if _, err := s.scanString(); err != nil {
				return err
			}
			if err := s.expect(':', "expected ':' after object member name"); err != nil {
				return err
			}
			s.skipWS()
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			done, err := s.endMember()
			if err != nil || done {
				return err
			}
		}
	case c == '[':
		if depth >= maxJSONDepth {
			return s.fail("nesting too deep")
		}
		s.pos++
		s.skipWS()
		if s.peek() == ']' {
			s.pos++
			return nil
		}
		for {
			s.skipWS()
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			s.skipWS()
			switch s.peek() {
			case ',':
				s.pos++
			case ']':
				s.pos++
				return nil
			default:
				return s.fail("expected ',' or ']' in array")
			}
		}
	case s.pos >= len(s.src):
		return s.fail("unexpected end of input")
	default:
		return s.fail("invalid character looking for a value")
	}
}

// memberName scans an object member name and returns it. Names are compared
// byte for byte (case-sensitive, unlike encoding/json's struct matching); a
// name written with escapes ("k\u0065y") is unescaped first, which is rare
// and may allocate.
func (s *jsonScanner) memberName() (string, error) {
	s.skipWS()
	if s.peek() != '"' {
		return "", s.fail("expected string for object member name")
	}
	var name string
	src := s.src
	if i := skipPlain(src, s.pos+1); i < len(src) && src[i] == '"' {
		// Fast path: a plain ASCII name, as every producer writes them.
		name = unsafe.String(unsafe.SliceData(src[s.pos+1:]), i-(s.pos+1))
		s.pos = i + 1
	} else {
		sp, err := s.scanString()
		if err != nil {
			return "", err
		}
		b, _ := appendUnescaped(nil, src[sp.start:sp.end], sp.flags, false)
		name = string(b)
	}
	if s.pos < len(src) && src[s.pos] == ':' {
		s.pos++
	} else if err := s.expect(':', "expected ':' after object member name"); err != nil {
		return "", err
	}
	s.skipWS()
	return name, nil
}

// appendUnescaped appends the decoded content of a raw JSON string (as
// scanned, so its escapes are known to be well-formed) to dst.
//
// Like encoding/json, it replaces bytes that are not valid UTF-8 and lone
// UTF-16 surrogates (\ud800 not followed by a low surrogate) with U+FFFD. In
// strict mode it does not replace them but reports ok=false instead: the
// event key uses that, because mapping distinct binary keys onto one
// "\ufffd" key would invent a hot key.
func appendUnescaped(dst, raw []byte, flags strFlags, strict bool) (out []byte, ok bool) {
	if flags&strEscaped == 0 {
		if flags&strNonASCII == 0 || utf8.Valid(raw) {
			return append(dst, raw...), true
		}
		if strict {
			return dst, false
		}
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			switch raw[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := rune(hex4(raw[i+2:]))
				i += 6
				if utf16.IsSurrogate(r) {
					r2 := rune(utf8.RuneError)
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						r2 = utf16.DecodeRune(r, rune(hex4(raw[i+2:])))
					}
					if r2 != utf8.RuneError {
						i += 6
						r = r2
					} else {
						// Lone surrogate: replaced, and whatever follows
						// is decoded on its own (encoding/json does the same).
						if strict {
							return dst, false
						}
						r = utf8.RuneError
					}
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, raw[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				if strict {
					return dst, false
				}
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst, true
}

func hex4(b []byte) int {
	return hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3])
}

// jsonSafe[c] is true for ASCII bytes that appear in a JSON string as-is.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendQuoted appends s as a JSON string. It escapes what JSON requires
// (quote, backslash, control characters) plus U+2028 and U+2029 (so the
// output is also valid JavaScript), and writes each byte that is not valid
// UTF-8 as \ufffd, exactly as encoding/json does. It does not escape <, >
// and & (encoding/json's HTML escaping): records are not embedded in HTML.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
