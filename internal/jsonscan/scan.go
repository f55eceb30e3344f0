package jsonscan

import (
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// MaxDepth bounds the nesting of values SkipValue walks, so that a record
// of a million '[' cannot exhaust the stack.
const MaxDepth = 512

// SyntaxError says what was wrong with the input and at which byte offset.
// Callers turn it into their own error types.
type SyntaxError struct {
	Msg    string
	Offset int
}

func (e *SyntaxError) Error() string {
	return e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Flags describe a scanned string's raw bytes, so the common case (plain
// ASCII) can be copied without a second look.
type Flags uint8

const (
	Escaped  Flags = 1 << iota // contains backslash escapes
	NonASCII                   // contains bytes >= 0x80 (maybe invalid UTF-8)
)

// Span is the raw content of a JSON string, between its quotes:
// Src[Start:End], escapes not yet decoded.
type Span struct {
	Start, End int
	Flags      Flags
	// Set is true for a span that was scanned, so a zero Span means
	// "absent" even for an empty string.
	Set bool
}

// Number is the raw text of a JSON number, Src[Start:End].
type Number struct {
	Start, End int
	IsInt      bool // no fraction and no exponent
}

// Scanner is a position in a JSON text. The zero value is not useful: set
// Src. Methods that fail leave Pos at or near the offending byte and return
// a *SyntaxError.
type Scanner struct {
	Src []byte
	Pos int
}

// Fail returns a *SyntaxError with msg at the current position.
func (s *Scanner) Fail(msg string) error {
	return &SyntaxError{Msg: msg, Offset: s.Pos}
}

// SkipWS skips JSON whitespace.
func (s *Scanner) SkipWS() {
	for s.Pos < len(s.Src) {
		switch s.Src[s.Pos] {
		case ' ', '\t', '\n', '\r':
			s.Pos++
		default:
			return
		}
	}
}

// Peek returns the next byte, or 0 at the end of input (0 never starts a
// JSON token, so callers treat it as "unexpected").
func (s *Scanner) Peek() byte {
	if s.Pos < len(s.Src) {
		return s.Src[s.Pos]
	}
	return 0
}

// Expect consumes c after optional whitespace, or fails with msg.
func (s *Scanner) Expect(c byte, msg string) error {
	s.SkipWS()
	if s.Peek() != c {
		return s.Fail(msg)
	}
	s.Pos++
	return nil
}

// EndMember is called after an object member's value: it consumes ','
// (returning false, more members follow) or '}' (returning true).
func (s *Scanner) EndMember() (done bool, err error) {
	s.SkipWS()
	switch s.Peek() {
	case ',':
		s.Pos++
		return false, nil
	case '}':
		s.Pos++
		return true, nil
	}
	return false, s.Fail("expected ',' or '}' after object member")
}

// End checks that only whitespace follows the top-level value.
func (s *Scanner) End() error {
	s.SkipWS()
	if s.Pos != len(s.Src) {
		return s.Fail("unexpected data after top-level value")
	}
	return nil
}

// Byte classes inside a JSON string; see String.
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

// String consumes the string starting at the current '"' and returns its
// raw span. Escapes are checked for syntax but not decoded
// (AppendUnescaped does that).
func (s *Scanner) String() (Span, error) {
	src := s.Src
	i := s.Pos + 1 // past the opening quote
	sp := Span{Start: i, Set: true}
	for {
		i = SkipPlain(src, i)
		if i >= len(src) {
			s.Pos = len(src)
			return sp, s.Fail("unterminated string")
		}
		switch strClass[src[i]] {
		case chQuote:
			sp.End = i
			s.Pos = i + 1
			return sp, nil
		case chNonASCII:
			sp.Flags |= NonASCII
			i++
		case chControl:
			s.Pos = i
			return sp, s.Fail("control character in string")
		case chEscape:
			sp.Flags |= Escaped
			if i+1 >= len(src) {
				s.Pos = len(src)
				return sp, s.Fail("unterminated string")
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(src) || !isHex4(src[i+2:i+6]) {
					s.Pos = i
					return sp, s.Fail(`invalid \u escape in string`)
				}
				i += 6
			default:
				s.Pos = i
				return sp, s.Fail("invalid escape in string")
			}
		}
	}
}

// SkipPlain returns the index of the first byte at or after i that is not
// printable ASCII other than '"' and '\\' (or len(src)): the end of the
// plain run of a string's content. A table lookup per byte measured twice
// as fast as testing eight bytes at a time (SWAR): event strings are short.
func SkipPlain(src []byte, i int) int {
	for i < len(src) && strClass[src[i]] == chPlain {
		i++
	}
	return i
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if HexVal(c) < 0 {
			return false
		}
	}
	return true
}

// HexVal returns the value of the hexadecimal digit c, or -1.
func HexVal(c byte) int {
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

// Number consumes a number per the RFC 8259 grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Scanner) Number() (Number, error) {
	src := s.Src
	i := s.Pos
	n := Number{Start: i, IsInt: true}
	if i < len(src) && src[i] == '-' {
		i++
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && '1' <= src[i] && src[i] <= '9':
		for i < len(src) && IsDigit(src[i]) {
			i++
		}
	default:
		s.Pos = i
		return n, s.Fail("invalid number")
	}
	if i < len(src) && src[i] == '.' {
		n.IsInt = false
		i++
		if i >= len(src) || !IsDigit(src[i]) {
			s.Pos = i
			return n, s.Fail("invalid number: digit expected after '.'")
		}
		for i < len(src) && IsDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		n.IsInt = false
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || !IsDigit(src[i]) {
			s.Pos = i
			return n, s.Fail("invalid number: digit expected in exponent")
		}
		for i < len(src) && IsDigit(src[i]) {
			i++
		}
	}
	n.End = i
	s.Pos = i
	return n, nil
}

// IsDigit reports whether c is an ASCII decimal digit.
func IsDigit(c byte) bool { return '0' <= c && c <= '9' }

// Int64 converts a scanned number to an int64. Numbers with a fraction or
// an exponent (1.5e3, as JavaScript producers write) are truncated toward
// zero; values outside [min, max] are a *SyntaxError.
func (s *Scanner) Int64(n Number, min, max int64) (int64, error) {
	txt := s.Src[n.Start:n.End]
	if n.IsInt {
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
				return 0, &SyntaxError{Msg: "number out of range", Offset: n.Start}
			}
			return v, nil
		}
	}
	str := unsafe.String(unsafe.SliceData(s.Src[n.Start:]), n.End-n.Start)
	if n.IsInt {
		v, err := strconv.ParseInt(str, 10, 64)
		if err != nil || v < min || v > max {
			return 0, &SyntaxError{Msg: "number out of range", Offset: n.Start}
		}
		return v, nil
	}
	f, err := strconv.ParseFloat(str, 64)
	// ParseFloat reports underflow (1e-400) as an error with f = 0, which is
	// fine here; overflow gives ±Inf. float64(math.MaxInt64) rounds up to
	// 2^63, so ">= max+1" is the exact bound for every max used here.
	if (err != nil && math.IsInf(f, 0)) || f < float64(min) || f >= float64(max)+1 {
		return 0, &SyntaxError{Msg: "number out of range", Offset: n.Start}
	}
	return int64(f), nil
}

// Literal consumes word (true, false or null).
func (s *Scanner) Literal(word string) error {
	if len(s.Src)-s.Pos < len(word) || string(s.Src[s.Pos:s.Pos+len(word)]) != word {
		return s.Fail("invalid literal")
	}
	s.Pos += len(word)
	return nil
}

// SkipValue consumes any JSON value, validating it; depth is the nesting
// level of the value (0 for a member of the top-level object), and values
// nested deeper than MaxDepth are rejected. The caller has skipped leading
// whitespace.
func (s *Scanner) SkipValue(depth int) error {
	switch c := s.Peek(); {
	case c == '"':
		_, err := s.String()
		return err
	case c == '-' || IsDigit(c):
		_, err := s.Number()
		return err
	case c == 't':
		return s.Literal("true")
	case c == 'f':
		return s.Literal("false")
	case c == 'n':
		return s.Literal("null")
	case c == '{':
		if depth >= MaxDepth {
			return s.Fail("nesting too deep")
		}
		s.Pos++
		s.SkipWS()
		if s.Peek() == '}' {
			s.Pos++
			return nil
		}
		for {
			s.SkipWS()
			if s.Peek() != '"' {
				return s.Fail("expected string for object member name")
			}
			if _, err := s.String(); err != nil {
				return err
			}
			if err := s.Expect(':', "expected ':' after object member name"); err != nil {
				return err
			}
			s.SkipWS()
			if err := s.SkipValue(depth + 1); err != nil {
				return err
			}
			done, err := s.EndMember()
			if err != nil || done {
				return err
			}
		}
	case c == '[':
		if depth >= MaxDepth {
			return s.Fail("nesting too deep")
		}
		s.Pos++
		s.SkipWS()
		if s.Peek() == ']' {
			s.Pos++
			return nil
		}
		for {
			s.SkipWS()
			if err := s.SkipValue(depth + 1); err != nil {
				return err
			}
			s.SkipWS()
			switch s.Peek() {
			case ',':
				s.Pos++
			case ']':
				s.Pos++
				return nil
			default:
				return s.Fail("expected ',' or ']' in array")
			}
		}
	case s.Pos >= len(s.Src):
		return s.Fail("unexpected end of input")
	default:
		return s.Fail("invalid character looking for a value")
	}
}

// MemberName scans an object member name, the ':' after it and the
// whitespace before the value, and returns the name. Names are compared
// byte for byte by callers (case-sensitive, unlike encoding/json's struct
// matching). A plain ASCII name, as every producer writes them, is returned
// as a string over Src without copying: compare it, never keep it. A name
// written with escapes ("k\u0065y") is unescaped into a new string, which
// is rare and allocates.
func (s *Scanner) MemberName() (string, error) {
	s.SkipWS()
	if s.Peek() != '"' {
		return "", s.Fail("expected string for object member name")
	}
	var name string
	src := s.Src
	if i := SkipPlain(src, s.Pos+1); i < len(src) && src[i] == '"' {
		name = unsafe.String(unsafe.SliceData(src[s.Pos+1:]), i-(s.Pos+1))
		s.Pos = i + 1
	} else {
		sp, err := s.String()
		if err != nil {
			return "", err
		}
		b, _ := AppendUnescaped(nil, src[sp.Start:sp.End], sp.Flags, false)
		name = string(b)
	}
	if s.Pos < len(src) && src[s.Pos] == ':' {
		s.Pos++
	} else if err := s.Expect(':', "expected ':' after object member name"); err != nil {
		return "", err
	}
	s.SkipWS()
	return name, nil
}
