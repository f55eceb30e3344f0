package schemas

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// HeaderRecordID is the Kafka record header that carries a record's
// RecordID, in its text form, on every record ingest writes (events and
// dead letters alike).
const HeaderRecordID = "keyheat-id"

// IDKind is the kind of source a RecordID names.
type IDKind uint8

// The kinds of source.
const (
	IDTail  IDKind = iota + 1 // a line of a followed file
	IDStdin                   // a line of standard input, which cannot be read again
	IDTopic                   // a record of a raw log topic
	IDGen                     // an event of the synthetic generator
)

// ErrMalformedRecordID is wrapped by ParseRecordID's errors.
var ErrMalformedRecordID = errors.New("malformed record id")

// RecordID is the deterministic identity of an ingested record: the source
// it came from, its position there, and its index among the records its
// line became. A record sent again (a source that delivers at least once
// re-sends after a crash) carries the same id, so a consumer that keeps
// the ids it has seen can drop the duplicate. Ids are unique per record:
// the records of one line that names several keys (a redis MGET k1 k2)
// differ in Index, even when two of them have the same key.
//
// The text form, by kind (every number a canonical decimal: no sign, no
// leading zero):
//
//	tail   <path>@<dev>:<ino>:<filegen>:<offset>   /var/log/a.log@2049:131:0:1234
//	stdin  stdin@<start_ns>:<offset>               stdin@1742220131000000000:0
//	topic  <topic>/<partition>/<offset>            app.raw/3/1187
//	gen    gen:<seed>:<seq>                        gen:1:42
//
// followed, for a record whose Index is not 0, by #<index>:
// /var/log/a.log@2049:131:0:1234#2 is the third record of that line.
//
// A tail path is absolute (it starts with '/') and may hold '@' and ':',
// so the numbers after it are read from the right; dev and ino are the
// file's identity and filegen counts the times it was found truncated, so
// ids stay unique when a file is rewritten. A stdin id's start_ns is the
// run's start in Unix nanoseconds: stdin cannot be read twice, so its ids
// are unique per run, not stable across runs. A topic is a legal Kafka
// topic name (letters, digits, '.', '_', '-'), which can hold none of
// '/', '@' and ':'. The four forms cannot be mistaken for one another, and
// a suffix cannot be mistaken for part of one: every form ends in digits
// after a ':' or '/', so a '#' followed only by digits at the very end is
// the suffix (a path may hold '#', but never after its id's last ':').
type RecordID struct {
	Kind IDKind
	// Path, Dev, Ino and FileGen name a tailed file (IDTail).
	Path     string
	Dev, Ino uint64
	FileGen  uint64
	// StartNs is the start of a stdin run (IDStdin).
	StartNs int64
	// Topic and Partition name a raw topic's partition (IDTopic).
	Topic     string
	Partition int32
	// Seed is the generator's random seed (IDGen).
	Seed uint64
	// Offset is the position in the stream: the byte offset of a line's
	// first byte (IDTail, IDStdin), a record's offset (IDTopic), an
	// event's sequence number (IDGen). Never negative.
	Offset int64
	// Index is the record's place among the records its line became, from
	// 0; nearly every line becomes one record, whose Index is 0.
	Index int
}

// Prefix returns the text form of id up to, not including, its offset:
// what every record of one stream shares. Sources build it once per
// stream and hand it to AppendRecordID with each record's offset. The
// fields must satisfy the grammar on RecordID (an absolute path, a legal
// topic name); ParseRecordID refuses what they would otherwise make.
func (id RecordID) Prefix() string {
	var b []byte
	switch id.Kind {
	case IDTail:
		b = append(b, id.Path...)
		b = append(b, '@')
		b = strconv.AppendUint(b, id.Dev, 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, id.Ino, 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, id.FileGen, 10)
		b = append(b, ':')
	case IDStdin:
		b = append(b, "stdin@"...)
		b = strconv.AppendInt(b, id.StartNs, 10)
		b = append(b, ':')
	case IDTopic:
		b = append(b, id.Topic...)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(id.Partition), 10)
		b = append(b, '/')
	case IDGen:
		b = append(b, "gen:"...)
		b = strconv.AppendUint(b, id.Seed, 10)
		b = append(b, ':')
	}
	return string(b)
}

// String returns the text form of id, as the keyheat-id header holds it.
func (id RecordID) String() string {
	return string(AppendRecordID(nil, id.Prefix(), id.Offset, id.Index))
}

// AppendRecordID appends the text form of the id whose Prefix is prefix,
// whose offset is offset and whose Index is index to dst. It is the
// per-record half of building an id and does not allocate beyond growing
// dst.
func AppendRecordID(dst []byte, prefix string, offset int64, index int) []byte {
	dst = append(dst, prefix...)
	dst = strconv.AppendInt(dst, offset, 10)
	if index > 0 {
		dst = append(dst, '#')
		dst = strconv.AppendInt(dst, int64(index), 10)
	}
	return dst
}

// ParseRecordID reads the text form of a RecordID. It accepts exactly what
// String produces for ids that satisfy the grammar; anything else is an
// error wrapping ErrMalformedRecordID.
func ParseRecordID(s string) (RecordID, error) {
	id, why := parseRecordID(s)
	if why != "" {
		return RecordID{}, fmt.Errorf("%w %q: %s", ErrMalformedRecordID, s, why)
	}
	return id, nil
}

func parseRecordID(s string) (RecordID, string) {
	index := 0
	if j := strings.LastIndexByte(s, '#'); j >= 0 && allDigits(s[j+1:]) {
		v, ok := canonicalUint(s[j+1:], math.MaxInt32)
		if !ok || v == 0 {
			return RecordID{}, fmt.Sprintf("index %q is not a canonical number above 0", s[j+1:])
		}
		index, s = int(v), s[:j]
	}
	id, why := parseStream(s)
	id.Index = index
	return id, why
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseStream reads an id without its #index.
func parseStream(s string) (RecordID, string) {
	switch {
	case strings.HasPrefix(s, "/"):
		// Numbers from the right: the path may hold '@' and ':'.
		var n [4]uint64
		rest := s
		for i := 3; i >= 0; i-- {
			sep := byte(':')
			if i == 0 {
				sep = '@'
			}
			j := strings.LastIndexByte(rest, sep)
			if j < 0 {
				return RecordID{}, "a tail id is path@dev:ino:filegen:offset"
			}
			v, ok := canonicalUint(rest[j+1:], math.MaxUint64)
			if !ok || i == 3 && v > math.MaxInt64 {
				return RecordID{}, fmt.Sprintf("%q is not a canonical number", rest[j+1:])
			}
			n[i], rest = v, rest[:j]
		}
		return RecordID{Kind: IDTail, Path: rest, Dev: n[0], Ino: n[1], FileGen: n[2], Offset: int64(n[3])}, ""
	case strings.HasPrefix(s, "stdin@"):
		start, off, ok := twoNumbers(s[len("stdin@"):], math.MaxInt64)
		if !ok {
			return RecordID{}, "a stdin id is stdin@start_ns:offset"
		}
		return RecordID{Kind: IDStdin, StartNs: int64(start), Offset: off}, ""
	case strings.HasPrefix(s, "gen:"):
		seed, seq, ok := twoNumbers(s[len("gen:"):], math.MaxUint64)
		if !ok {
			return RecordID{}, "a gen id is gen:seed:seq"
		}
		return RecordID{Kind: IDGen, Seed: seed, Offset: seq}, ""
	}
	topic, rest, ok1 := strings.Cut(s, "/")
	part, off, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 || !legalTopic(topic) {
		return RecordID{}, "not a tail (/path@…), stdin (stdin@…), gen (gen:…) or topic (topic/partition/offset) id"
	}
	p, okp := canonicalUint(part, math.MaxInt32)
	o, oko := canonicalUint(off, math.MaxInt64)
	if !okp || !oko {
		return RecordID{}, "partition and offset must be canonical numbers"
	}
	return RecordID{Kind: IDTopic, Topic: topic, Partition: int32(p), Offset: int64(o)}, ""
}

// twoNumbers reads "<a>:<b>" with a at most maxA and b an int64.
func twoNumbers(s string, maxA uint64) (uint64, int64, bool) {
	as, bs, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, false
	}
	a, okA := canonicalUint(as, maxA)
	b, okB := canonicalUint(bs, math.MaxInt64)
	return a, int64(b), okA && okB
}

// canonicalUint parses a decimal as strconv.Format* writes it (no sign,
// no leading zero) that is at most limit.
func canonicalUint(s string, limit uint64) (uint64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil && v <= limit
}

// legalTopic applies Kafka's alphabet for topic names.
func legalTopic(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return s != ""
}
