package schemas

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"
)

// This file writes a WindowReport's JSON by hand. The merger writes one
// report per app per window, each listing up to five rankings of TopN
// keys, and encoding/json's reflection (and the re-compaction of every
// KeyCount's MarshalJSON output) took about a millisecond a report, half
// of the merge stage's time at a thousand windows. The bytes are exactly
// those encoding/json writes for the struct (report_json_test.go checks
// it on generated and hostile reports, and a fuzz target on any strings):
// fields in declaration order with their omitempty rules, strings
// escaped as encoding/json escapes them (HTML characters, U+2028 and
// U+2029, invalid UTF-8 as U+FFFD), floats in its ES6 form, and
// "key_b64" beside a key that is not UTF-8 (rawkey.go).
//
// A field added to WindowReport or to a type it holds must be added here
// too: TestReportJSONMatchesEncodingJSON fills every field by reflection
// and fails on a difference.

// appendJSON appends r's JSON form to dst. ok is false when a float is
// NaN or infinite, which JSON cannot carry; the caller then lets
// encoding/json report the error.
func (r *WindowReport) appendJSON(dst []byte) (out []byte, ok bool) {
	e := jsonAppender{b: dst, ok: true}
	e.b = append(e.b, `{"v":`...)
	e.int(int64(r.Version))
	e.b = append(e.b, `,"id":`...)
	e.str(r.ID)
	e.b = append(e.b, `,"scope":`...)
	e.str(r.Scope)
	if r.App != "" {
		e.b = append(e.b, `,"app":`...)
		e.str(r.App)
	}
	e.b = append(e.b, `,"start_ms":`...)
	e.int(r.StartMs)
	e.b = append(e.b, `,"end_ms":`...)
	e.int(r.EndMs)
	e.b = append(e.b, `,"topics":`...)
	e.strs(r.Topics)
	e.uintField(`,"events":`, r.Events)
	e.uintField(`,"bytes":`, r.Bytes)
	e.uintField(`,"reads":`, r.Reads)
	e.uintField(`,"writes":`, r.Writes)
	e.uintField(`,"latency_us":`, r.LatencyUs)
	e.uintField(`,"late":`, r.Late)
	e.uintField(`,"distinct":`, r.Distinct)
	e.b = append(e.b, `,"keyed":`...)
	e.bool(r.Keyed)
	if r.Partial {
		e.b = append(e.b, `,"partial":true`...)
	}
	if len(r.Missing) > 0 {
		e.b = append(e.b, `,"missing":`...)
		e.strs(r.Missing)
	}
	e.b = append(e.b, `,"top":`...)
	e.keys(r.Top)
	e.uintField(`,"floor":`, r.Floor)
	e.b = append(e.b, `,"guaranteed":`...)
	e.int(int64(r.Guaranteed))
	if r.Approximate {
		e.b = append(e.b, `,"approximate":true`...)
	}
	for _, l := range [...]struct {
		name string
		keys []KeyCount
	}{{`,"top_bytes":`, r.TopBytes}, {`,"top_reads":`, r.TopReads}, {`,"top_writes":`, r.TopWrites}, {`,"top_latency":`, r.TopLatency}} {
		if len(l.keys) > 0 {
			e.b = append(e.b, l.name...)
			e.keys(l.keys)
		}
	}
	e.b = append(e.b, `,"skew":`...)
	e.skew(&r.Skew)
	if len(r.Advice) > 0 {
		e.b = append(e.b, `,"advice":[`...)
		for i := range r.Advice {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.advice(&r.Advice[i])
		}
		e.b = append(e.b, ']')
	}
	e.b = append(e.b, '}')
	return e.b, e.ok
}

// jsonAppender appends JSON values to b; ok turns false on a value JSON
// cannot carry.
type jsonAppender struct {
	b  []byte
	ok bool
	// The last float written and where its text is in b: a report's keys
	// often share a share (a quiet window's keys all have a count of 1),
	// and formatting a float costs more than copying its text.
	lastFloat      uint64 // its bits
	lastAt, lastTo int    // lastTo 0: none yet
}

func (e *jsonAppender) int(v int64)   { e.b = strconv.AppendInt(e.b, v, 10) }
func (e *jsonAppender) uint(v uint64) { e.b = strconv.AppendUint(e.b, v, 10) }

func (e *jsonAppender) uintField(name string, v uint64) {
	e.b = append(e.b, name...)
	e.b = strconv.AppendUint(e.b, v, 10)
}

func (e *jsonAppender) bool(v bool) {
	if v {
		e.b = append(e.b, "true"...)
	} else {
		e.b = append(e.b, "false"...)
	}
}

// float writes f as encoding/json does: like ES6's number to string, %f
// between 1e-6 and 1e21, %e outside with the exponent unpadded.
func (e *jsonAppender) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		e.ok = false
		e.b = append(e.b, '0')
		return
	}
	if e.lastTo > 0 && math.Float64bits(f) == e.lastFloat {
		e.b = append(e.b, e.b[e.lastAt:e.lastTo]...)
		return
	}
	at := len(e.b)
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9.
		n := len(e.b)
		if n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
			e.b[n-2] = e.b[n-1]
			e.b = e.b[:n-1]
		}
	}
	e.lastFloat, e.lastAt, e.lastTo = math.Float64bits(f), at, len(e.b)
}

// floatField writes name and f; omitEmpty leaves both out when f is 0.
func (e *jsonAppender) floatField(name string, f float64, omitEmpty bool) {
	if omitEmpty && f == 0 {
		return
	}
	e.b = append(e.b, name...)
	e.float(f)
}

// strs writes a string slice, null when nil.
func (e *jsonAppender) strs(l []string) {
	if l == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '[')
	for i, s := range l {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(s)
	}
	e.b = append(e.b, ']')
}

// jsonHex are the digits encoding/json writes \u escapes with.
const jsonHex = "0123456789abcdef"

// jsonPlain[b] is true for the ASCII bytes encoding/json copies into a
// string as they are: printable, and none of " \ < > &.
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range `"\<>&` {
		t[b] = false
	}
	return t
}()

// str writes s as a JSON string exactly as encoding/json does with HTML
// escaping on (its default).
func (e *jsonAppender) str(s string) {
	b := append(e.b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonPlain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', jsonHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	e.b = append(b, '"')
}

// keyB64 writes ,"key_b64":"…" for a key that is not UTF-8.
func (e *jsonAppender) keyB64(key string) {
	if utf8.ValidString(key) {
		return
	}
	e.b = append(e.b, `,"key_b64":"`...)
	e.b = base64.StdEncoding.AppendEncode(e.b, []byte(key))
	e.b = append(e.b, '"')
}

// keys writes a KeyCount slice, null when nil.
func (e *jsonAppender) keys(l []KeyCount) {
	if l == nil {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '[')
	for i := range l {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.key(&l[i])
	}
	e.b = append(e.b, ']')
}

// key writes k as KeyCount.MarshalJSON does.
func (e *jsonAppender) key(k *KeyCount) {
	e.b = append(e.b, `{"app":`...)
	e.str(k.App)
	e.b = append(e.b, `,"key":`...)
	e.str(k.Key)
	e.uintField(`,"count":`, k.Count)
	for _, f := range [...]struct {
		name string
		v    uint64
	}{{`,"error":`, k.Error}, {`,"bytes":`, k.Bytes}, {`,"reads":`, k.Reads}, {`,"writes":`, k.Writes}, {`,"latency_us":`, k.LatencyUs}} {
		if f.v != 0 {
			e.uintField(f.name, f.v)
		}
	}
	e.b = append(e.b, `,"partition":`...)
	e.int(int64(k.Partition))
	e.floatField(`,"share":`, k.Share, true)
	if k.BytesError != 0 {
		e.uintField(`,"bytes_error":`, k.BytesError)
	}
	if k.Shortened {
		e.b = append(e.b, `,"shortened":true`...)
	}
	e.keyB64(k.Key)
	e.b = append(e.b, '}')
}

// advice writes a as KeyAdvice.MarshalJSON does.
func (e *jsonAppender) advice(a *KeyAdvice) {
	e.b = append(e.b, `{"app":`...)
	e.str(a.App)
	e.b = append(e.b, `,"key":`...)
	e.str(a.Key)
	e.floatField(`,"rate":`, a.Rate, false)
	e.floatField(`,"threshold":`, a.Threshold, false)
	e.floatField(`,"read_share":`, a.ReadShare, false)
	e.b = append(e.b, `,"mitigation":{"kind":`...)
	e.str(a.Mitigation.Kind)
	if a.Mitigation.Split != 0 {
		e.b = append(e.b, `,"split":`...)
		e.int(int64(a.Mitigation.Split))
	}
	e.b = append(e.b, '}')
	e.keyB64(a.Key)
	e.b = append(e.b, '}')
}

// skew writes s.
func (e *jsonAppender) skew(s *Skew) {
	e.b = append(e.b, `{"partitions":`...)
	if s.Partitions == nil {
		e.b = append(e.b, "null"...)
	} else {
		e.b = append(e.b, '[')
		for i := range s.Partitions {
			p := &s.Partitions[i]
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = append(e.b, `{"topic":`...)
			e.str(p.Topic)
			e.b = append(e.b, `,"partition":`...)
			e.int(int64(p.Partition))
			e.uintField(`,"events":`, p.Events)
			e.uintField(`,"bytes":`, p.Bytes)
			e.floatField(`,"share":`, p.Share, false)
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	e.floatField(`,"max_mean":`, s.MaxMean, false)
	e.floatField(`,"gini":`, s.Gini, false)
	e.floatField(`,"top1_share":`, s.Top1Share, false)
	e.floatField(`,"top10_share":`, s.Top10Share, false)
	if len(s.Nodes) > 0 {
		e.b = append(e.b, `,"nodes":[`...)
		for i := range s.Nodes {
			n := &s.Nodes[i]
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = append(e.b, `{"node":`...)
			e.str(n.Node)
			e.uintField(`,"first_slot":`, uint64(n.FirstSlot))
			e.uintField(`,"last_slot":`, uint64(n.LastSlot))
			if len(n.Ranges) > 0 {
				e.b = append(e.b, `,"ranges":[`...)
				for j, r := range n.Ranges {
					if j > 0 {
						e.b = append(e.b, ',')
					}
					e.uintField(`{"first":`, uint64(r.First))
					e.uintField(`,"last":`, uint64(r.Last))
					e.b = append(e.b, '}')
				}
				e.b = append(e.b, ']')
			}
			e.uintField(`,"events":`, n.Events)
			e.floatField(`,"share":`, n.Share, false)
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	e.floatField(`,"node_max_mean":`, s.NodeMaxMean, true)
	e.floatField(`,"node_gini":`, s.NodeGini, true)
	if len(s.HotSlots) > 0 {
		e.b = append(e.b, `,"hot_slots":[`...)
		for i, sc := range s.HotSlots {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.uintField(`{"slot":`, uint64(sc.Slot))
			e.uintField(`,"events":`, sc.Events)
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
	e.b = append(e.b, '}')
}
