package schemas

import (
	"math"
	"strconv"
	"time"
	"unsafe"

	"github.com/keyheat/keyheat/internal/jsonscan"
)

// This file holds what the event and the dead-letter decoders share on top
// of internal/jsonscan: readers for the member values both formats have
// (strings, bounded integers, "ts"), and jsonScanner, the small method set
// the dead-letter decoder is written against.

// stringValue scans the value of a string member; null gives an unset span.
func stringValue(s *jsonscan.Scanner, name string) (jsonscan.Span, error) {
	switch s.Peek() {
	case '"':
		return s.String()
	case 'n':
		return jsonscan.Span{}, s.Literal("null")
	}
	return jsonscan.Span{}, s.Fail(`"` + name + `" must be a string`)
}

// intValue scans the value of an integer member in [min, max]; null gives 0.
func intValue(s *jsonscan.Scanner, name string, min, max int64) (int64, error) {
	if v, ok := smallInt(s); ok {
		if v < min || v > max {
			return 0, s.Fail("number out of range")
		}
		return v, nil
	}
	switch c := s.Peek(); {
	case c == '-' || jsonscan.IsDigit(c):
		n, err := s.Number()
		if err != nil {
			return 0, err
		}
		return s.Int64(n, min, max)
	case c == 'n':
		return 0, s.Literal("null")
	}
	return 0, s.Fail(`"` + name + `" must be a number`)
}

// smallInt is intValue's fast path: a plain integer of at most 18 digits,
// which cannot overflow, consumed in one pass. Anything else (fraction,
// exponent, leading zero, long or malformed) leaves the position alone and
// returns ok=false for the general path to handle or reject.
func smallInt(s *jsonscan.Scanner) (v int64, ok bool) {
	src := s.Src
	i := s.Pos
	neg := i < len(src) && src[i] == '-'
	if neg {
		i++
	}
	start := i
	for i < len(src) && jsonscan.IsDigit(src[i]) {
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
	s.Pos = i
	if neg {
		v = -v
	}
	return v, true
}

// timeValue scans "ts": a number of Unix ms, null, or a string holding
// either decimal Unix ms or an RFC 3339 time (for hand-written records).
func timeValue(s *jsonscan.Scanner) (int64, error) {
	if s.Peek() != '"' {
		return intValue(s, "ts", math.MinInt64, math.MaxInt64)
	}
	at := s.Pos
	sp, err := s.String()
	if err != nil {
		return 0, err
	}
	raw := s.Src[sp.Start:sp.End]
	if sp.Flags == 0 && len(raw) > 0 {
		str := unsafe.String(&raw[0], len(raw))
		if v, err := strconv.ParseInt(str, 10, 64); err == nil {
			return v, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, str); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, &jsonscan.SyntaxError{Msg: `"ts" string is neither Unix milliseconds nor an RFC 3339 time`, Offset: at}
}

// strSpan is jsonscan.Span under the names the dead-letter decoder uses.
type strSpan struct {
	start, end int
	flags      jsonscan.Flags
	set        bool
}

// jsonScanner is jsonscan.Scanner's state under the names the dead-letter
// decoder uses; each method runs the jsonscan method of the same name.
// Only the dead-letter path uses it, which is not hot; the event decoder
// uses jsonscan.Scanner directly.
type jsonScanner struct {
	src []byte
	pos int
}

func (s *jsonScanner) scanner() jsonscan.Scanner { return jsonscan.Scanner{Src: s.src, Pos: s.pos} }

func (s *jsonScanner) fail(msg string) error {
	return &jsonscan.SyntaxError{Msg: msg, Offset: s.pos}
}

func (s *jsonScanner) peek() byte {
	sc := s.scanner()
	return sc.Peek()
}

func (s *jsonScanner) skipWS() {
	sc := s.scanner()
	sc.SkipWS()
	s.pos = sc.Pos
}

func (s *jsonScanner) expect(c byte, msg string) error {
	sc := s.scanner()
	err := sc.Expect(c, msg)
	s.pos = sc.Pos
	return err
}

func (s *jsonScanner) memberName() (string, error) {
	sc := s.scanner()
	name, err := sc.MemberName()
	s.pos = sc.Pos
	return name, err
}

func (s *jsonScanner) endMember() (bool, error) {
	sc := s.scanner()
	done, err := sc.EndMember()
	s.pos = sc.Pos
	return done, err
}

func (s *jsonScanner) end() error {
	sc := s.scanner()
	err := sc.End()
	s.pos = sc.Pos
	return err
}

func (s *jsonScanner) literal(word string) error {
	sc := s.scanner()
	err := sc.Literal(word)
	s.pos = sc.Pos
	return err
}

func (s *jsonScanner) skipValue(depth int) error {
	sc := s.scanner()
	err := sc.SkipValue(depth)
	s.pos = sc.Pos
	return err
}

func (s *jsonScanner) stringValue(name string) (strSpan, error) {
	sc := s.scanner()
	sp, err := stringValue(&sc, name)
	s.pos = sc.Pos
	return strSpan{start: sp.Start, end: sp.End, flags: sp.Flags, set: sp.Set}, err
}

func (s *jsonScanner) intValue(name string, min, max int64) (int64, error) {
	sc := s.scanner()
	v, err := intValue(&sc, name, min, max)
	s.pos = sc.Pos
	return v, err
}

func (s *jsonScanner) timeValue() (int64, error) {
	sc := s.scanner()
	v, err := timeValue(&sc)
	s.pos = sc.Pos
	return v, err
}

func appendUnescaped(dst, raw []byte, flags jsonscan.Flags, strict bool) ([]byte, bool) {
	return jsonscan.AppendUnescaped(dst, raw, flags, strict)
}

func appendQuoted(dst []byte, s string) []byte { return jsonscan.AppendQuoted(dst, s) }
