package schemas

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// DeadLetter is the value of a record on keyheat.events.dlq: one input that
// keyheat could not use, why, and a bounded copy of what it was, so that an
// operator can see what broke and replay it after a fix. A rejected line is
// never dropped silently: it becomes a DeadLetter.
//
// Its JSON form (AppendDeadLetter, DecodeDeadLetter) is:
//
//	{"ts":1767225600456,"source":"keyheat.raw:3@1187","reason":"parse",
//	 "detail":"expected '{' …","raw":"GET /x HTTP/1.1","truncated":true,"orig_len":70211}
//
// Raw is written as the JSON string "raw" when it is valid UTF-8 (nearly
// every log line, readable with kcat), and otherwise as "raw_b64", standard
// base64 with padding, so binary input survives byte for byte. Exactly one
// of the two appears when Raw is not empty. "detail", "raw"/"raw_b64",
// "truncated" and "orig_len" are omitted when empty, false or zero.
type DeadLetter struct {
	// TimeMs is when keyheat rejected the input, in Unix milliseconds
	// (processing time; the input's own event time may be what was wrong).
	TimeMs int64
	// Source says where the input came from: a file path, a Kafka position
	// as "topic:partition@offset" (see KafkaSource), or "stdin".
	Source string
	// Reason is the machine-readable cause, as in InvalidEventError.
	Reason Reason
	// Detail explains the cause to a person.
	Detail string
	// Raw is the input as received, cut to a limit (see NewDeadLetter).
	Raw []byte
	// Truncated reports that Raw holds only the start of the input.
	Truncated bool
	// OrigLen is the length in bytes of the whole input, of which Raw is
	// the start. For ReasonLineTooLong from ingest's tail and stdin it is
	// the whole line's length, although they kept only its start (the
	// line limit, 1 MiB by default); a reader that cannot know the whole
	// length leaves the length of what it kept, a lower bound.
	OrigLen int
}

// DefaultMaxDeadLetterRaw bounds DeadLetter.Raw by default: 16 KiB keeps a
// whole log line in nearly every case and keeps dead-letter records far
// below Kafka's default 1 MB record limit.
const DefaultMaxDeadLetterRaw = 16 << 10

// SourceStdin is DeadLetter.Source for input read from standard input.
const SourceStdin = "stdin"

// KafkaSource formats a record's position as DeadLetter.Source expects:
// "topic:partition@offset", e.g. "keyheat.raw:3@1187".
func KafkaSource(topic string, partition int32, offset int64) string {
	b := make([]byte, 0, len(topic)+24)
	b = append(b, topic...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '@')
	b = strconv.AppendInt(b, offset, 10)
	return string(b)
}

// NewDeadLetter builds the dead letter for raw, read from source and
// rejected at nowMs because of err. The reason comes from err (ReasonOf: an
// *InvalidEventError's Reason, ReasonParse for any other error) and so does
// the detail (its Detail, or err.Error() for other errors).
//
// Raw is a copy of at most maxRaw bytes of raw (DefaultMaxDeadLetterRaw when
// maxRaw <= 0), so the caller may reuse its buffer. A cut never splits a
// UTF-8 sequence (it backs off up to 3 bytes), so a text line stays text.
func NewDeadLetter(nowMs int64, source string, err error, raw []byte, maxRaw int) DeadLetter {
	d := DeadLetter{TimeMs: nowMs, Source: source, Reason: ReasonOf(err), OrigLen: len(raw)}
	var ie *InvalidEventError
	switch {
	case errors.As(err, &ie):
		d.Detail = ie.Detail
	case err != nil:
		d.Detail = err.Error()
	}
	if maxRaw <= 0 {
		maxRaw = DefaultMaxDeadLetterRaw
	}
	if len(raw) > maxRaw {
		cut := maxRaw
		for k := 0; k < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(raw[cut]); k++ {
			cut--
		}
		raw = raw[:cut]
		d.Truncated = true
	}
	if len(raw) > 0 {
		d.Raw = append([]byte(nil), raw...)
	}
	return d
}

// ErrMalformedDeadLetter is wrapped by every error DecodeDeadLetter returns:
// the record on keyheat.events.dlq is not a dead letter this version
// understands.
var ErrMalformedDeadLetter = errors.New("malformed dead letter")

// AppendDeadLetter appends d to dst in its JSON form (see DeadLetter) and
// returns the extended buffer.
func AppendDeadLetter(dst []byte, d *DeadLetter) []byte {
	dst = append(dst, `{"ts":`...)
	dst = strconv.AppendInt(dst, d.TimeMs, 10)
	dst = append(dst, `,"source":`...)
	dst = appendQuoted(dst, d.Source)
	dst = append(dst, `,"reason":`...)
	dst = appendQuoted(dst, string(d.Reason))
	if d.Detail != "" {
		dst = append(dst, `,"detail":`...)
		dst = appendQuoted(dst, d.Detail)
	}
	if len(d.Raw) > 0 {
		if utf8.Valid(d.Raw) {
			dst = append(dst, `,"raw":`...)
			dst = appendQuoted(dst, string(d.Raw))
		} else {
			dst = append(dst, `,"raw_b64":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, d.Raw)
			dst = append(dst, '"')
		}
	}
	if d.Truncated {
		dst = append(dst, `,"truncated":true`...)
	}
	if d.OrigLen != 0 {
		dst = append(dst, `,"orig_len":`...)
		dst = strconv.AppendInt(dst, int64(d.OrigLen), 10)
	}
	return append(dst, '}')
}

// DecodeDeadLetter decodes the JSON form of a dead letter into d,
// overwriting every field. Members may come in any order; unknown members
// are skipped, so later versions may add some. Errors wrap
// ErrMalformedDeadLetter: invalid JSON, a member of the wrong type, both
// "raw" and "raw_b64", invalid base64, or a negative "orig_len" or one
// shorter than raw. On error d is reset.
func DecodeDeadLetter(src []byte, d *DeadLetter) error {
	if err := decodeDeadLetter(src, d); err != nil {
		*d = DeadLetter{}
		return err
	}
	return nil
}

func malformedDeadLetter(err error) error {
	return fmt.Errorf("%w: %w", ErrMalformedDeadLetter, err)
}

func decodeDeadLetter(src []byte, d *DeadLetter) error {
	s := jsonScanner{src: src}
	*d = DeadLetter{}
	var raw, rawB64 strSpan
	hasOrigLen := false
	if err := s.expect('{', "expected '{' to start a dead letter object"); err != nil {
		return malformedDeadLetter(err)
	}
	s.skipWS()
	if s.peek() == '}' {
		s.pos++
	} else {
		for {
			name, err := s.memberName()
			if err != nil {
				return malformedDeadLetter(err)
			}
			var sp strSpan
			switch name {
			case "ts":
				d.TimeMs, err = s.timeValue()
			case "source":
				sp, err = s.stringValue(name)
				d.Source = s.text(sp)
			case "reason":
				sp, err = s.stringValue(name)
				d.Reason = Reason(s.text(sp))
			case "detail":
				sp, err = s.stringValue(name)
				d.Detail = s.text(sp)
			case "raw":
				raw, err = s.stringValue(name)
			case "raw_b64":
				rawB64, err = s.stringValue(name)
			case "truncated":
				d.Truncated, err = s.boolValue(name)
			case "orig_len":
				hasOrigLen = s.peek() != 'n' // null means absent
				var v int64
				v, err = s.intValue(name, 0, math.MaxInt)
				d.OrigLen = int(v)
			default:
				err = s.skipValue(0)
			}
			if err != nil {
				return malformedDeadLetter(err)
			}
			done, err := s.endMember()
			if err != nil {
				return malformedDeadLetter(err)
			}
			if done {
				break
			}
		}
	}
	if err := s.end(); err != nil {
		return malformedDeadLetter(err)
	}

	switch {
	case raw.set && rawB64.set:
		return malformedDeadLetter(errors.New(`both "raw" and "raw_b64" are present`))
	case raw.set:
		d.Raw, _ = appendUnescaped(nil, src[raw.start:raw.end], raw.flags, false)
	case rawB64.set:
		// base64 needs no escapes, but a JSON writer may still use some
		// (encoding/json writes "\/" in some configurations).
		text, _ := appendUnescaped(nil, src[rawB64.start:rawB64.end], rawB64.flags, false)
		b, err := base64.StdEncoding.Strict().AppendDecode(nil, text)
		if err != nil {
			return malformedDeadLetter(errors.New(`"raw_b64" is not standard base64: ` + err.Error()))
		}
		d.Raw = b
	}
	if len(d.Raw) == 0 {
		d.Raw = nil
	}
	if hasOrigLen && d.OrigLen < len(d.Raw) {
		return malformedDeadLetter(errors.New(`"orig_len" is shorter than the raw bytes`))
	}
	return nil
}

// text decodes a scanned string as a Go string (replacing invalid UTF-8 with
// U+FFFD, like encoding/json); an unset span gives "".
func (s *jsonScanner) text(sp strSpan) string {
	if sp.end <= sp.start {
		return ""
	}
	b, _ := appendUnescaped(nil, s.src[sp.start:sp.end], sp.flags, false)
	return string(b)
}

// boolValue scans true, false or null (false).
func (s *jsonScanner) boolValue(name string) (bool, error) {
	switch s.peek() {
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	case 'n':
		return false, s.literal("null")
	}
	return false, s.fail(`"` + name + `" must be true or false`)
}

// MarshalJSON makes encoding/json write a DeadLetter in its wire form
// (AppendDeadLetter), e.g. in the HTTP API.
func (d DeadLetter) MarshalJSON() ([]byte, error) {
	return AppendDeadLetter(nil, &d), nil
}

// UnmarshalJSON makes encoding/json read a DeadLetter from its wire form
// (DecodeDeadLetter).
func (d *DeadLetter) UnmarshalJSON(b []byte) error {
	return DecodeDeadLetter(b, d)
}
