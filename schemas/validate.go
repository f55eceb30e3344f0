package schemas

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Reason says why an event or a line was rejected. It is what a dead-letter
// record carries and what the rejection counters are labelled with, so the
// set is small and stable.
type Reason string

// The reasons an event can be rejected.
const (
	ReasonParse       Reason = "parse"         // the line or record could not be decoded
	ReasonEmptyKey    Reason = "empty_key"     // no key, or an empty one
	ReasonKeyTooLong  Reason = "key_too_long"  // key over Limits.MaxKeyBytes
	ReasonKeyNotUTF8  Reason = "key_not_utf8"  // key is not valid UTF-8 where text is required
	ReasonTimeSkew    Reason = "time_skew"     // event time implausible: before MinTimeMs, too far from now, or ahead of its record
	ReasonMissingTime Reason = "missing_time"  // the format demands a time and the line had none
	ReasonLineTooLong Reason = "line_too_long" // a line over the source's line limit; only its start is kept
)

// Reasons returns every Reason, in the order above: the set counters and
// summaries of dead letters are kept by.
func Reasons() []Reason {
	return []Reason{ReasonParse, ReasonEmptyKey, ReasonKeyTooLong, ReasonKeyNotUTF8, ReasonTimeSkew, ReasonMissingTime, ReasonLineTooLong}
}

// InvalidEventError is returned when an event fails validation or decoding.
// Reason is the stable machine-readable cause; Detail is for people.
type InvalidEventError struct {
	Reason Reason
	Detail string
}

// Error formats the error as "invalid event: <reason>[: <detail>]".
func (e *InvalidEventError) Error() string {
	if e.Detail == "" {
		return "invalid event: " + string(e.Reason)
	}
	return "invalid event: " + string(e.Reason) + ": " + e.Detail
}

// ReasonOf returns the Reason carried by err, or ReasonParse when err is not
// (and does not wrap) an *InvalidEventError.
func ReasonOf(err error) Reason {
	var ie *InvalidEventError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return ReasonParse
}

// DefaultMaxKeyBytes is the default key length limit: 1 KiB. Keys longer
// than that are almost always a parser picking the wrong field.
const DefaultMaxKeyBytes = 1024

// DefaultMaxSkew is how far an event time may be from now (Validate), or
// ahead of when its record was produced (ValidateProduced), before it is
// rejected by default. Wide enough for replays of a recent day, narrow
// enough to catch a time in microseconds read as milliseconds, decades
// ahead.
const DefaultMaxSkew = 7 * 24 * time.Hour

// MinTimeMs is the earliest event time accepted while times are checked:
// 2001-09-09T01:46:40Z, the first Unix time of 13 digits in milliseconds.
// An access log from before it is not what keyheat reads; a time before it
// is almost always seconds (or a shorter unit) read as milliseconds.
const MinTimeMs int64 = 1_000_000_000_000

// Limits are the checks Validate applies. The mapstructure tags are the
// option names of the config file's events section. The zero value checks
// keys (DefaultMaxKeyBytes, UTF-8) and not times; DefaultLimits checks
// times as well.
type Limits struct {
	// MaxKeyBytes is the longest key accepted; 0 (or negative) means
	// DefaultMaxKeyBytes.
	MaxKeyBytes int `mapstructure:"max_key_bytes"`
	// MaxSkew bounds event times: Validate refuses a time further than
	// MaxSkew from its now either way; ValidateProduced one further than
	// MaxSkew ahead of when its record was produced. 0 (or negative)
	// disables every time check, for replays of old logs.
	MaxSkew time.Duration `mapstructure:"max_skew"`
	// AllowBinaryKeys accepts keys that are not valid UTF-8. Only the
	// binary codec carries them intact; formats that carry text (JSON,
	// log lines) leave it false.
	AllowBinaryKeys bool `mapstructure:"allow_binary_keys"`
}

// DefaultLimits are the limits keyheat applies unless configured
// otherwise: keys up to DefaultMaxKeyBytes of UTF-8, times within
// DefaultMaxSkew of now.
func DefaultLimits() Limits {
	return Limits{MaxKeyBytes: DefaultMaxKeyBytes, MaxSkew: DefaultMaxSkew}
}

// Validate checks e as it is produced, at nowMs (Unix ms): what ingest
// does with each line. The error is always an *InvalidEventError, checked
// in this order: ReasonEmptyKey, ReasonKeyTooLong, ReasonKeyNotUTF8
// (unless AllowBinaryKeys), then, when MaxSkew is positive,
// ReasonMissingTime for TimeMs 0 (a decoder's "no time given") and
// ReasonTimeSkew for a time before MinTimeMs or more than MaxSkew away
// from nowMs, in the past or the future.
func (l Limits) Validate(e *AccessEvent, nowMs int64) error {
	if err := l.validateKey(e); err != nil {
		return err
	}
	if l.MaxSkew <= 0 {
		return nil
	}
	if err := checkTimeSet(e); err != nil {
		return err
	}
	// |TimeMs - nowMs| computed in uint64 cannot overflow, even for
	// times near the ends of int64 (a corrupt record, a µs-vs-ms mixup).
	var d uint64
	if e.TimeMs >= nowMs {
		d = uint64(e.TimeMs) - uint64(nowMs)
	} else {
		d = uint64(nowMs) - uint64(e.TimeMs)
	}
	if d > uint64(l.MaxSkew.Milliseconds()) {
		return &InvalidEventError{Reason: ReasonTimeSkew,
			Detail: fmt.Sprintf("event time %d is %s from now %d; limit %s (is it in seconds or microseconds instead of milliseconds?)",
				e.TimeMs, msString(d), nowMs, l.MaxSkew)}
	}
	return nil
}

// ValidateProduced checks e as it is read back from Kafka by a batch
// whose windows close by its input alone (detect run --exit-at-end):
// producedMs is its record's Kafka timestamp, when the record was
// produced, and nowMs the reader's clock. The checks are Validate's but
// for the time, which is judged against when the event entered Kafka, not
// when it is read, and only ahead of it: an event time more than MaxSkew
// after min(producedMs, nowMs) is ReasonTimeSkew. A topic read long after
// it was written is thus judged as when it was written, and events
// produced after their time (a backfill of old logs, as ingest makes with
// events.max_skew 0) are accepted however old, as long as they are not
// before MinTimeMs. The bound is one-sided because only a time ahead
// harms: it moves its partition's clock forward, and every event after it
// is then late, while an old event is late itself or opens its
// partition's first windows early. nowMs caps producedMs, since no record
// was produced in the reader's future (a producer may stamp its records
// with their event times); a producedMs of 0 or less (no timestamp)
// means nowMs.
func (l Limits) ValidateProduced(e *AccessEvent, producedMs, nowMs int64) error {
	if err := l.validateKey(e); err != nil {
		return err
	}
	if l.MaxSkew <= 0 {
		return nil
	}
	if err := checkTimeSet(e); err != nil {
		return err
	}
	ref := nowMs
	if producedMs > 0 && producedMs < nowMs {
		ref = producedMs
	}
	// In uint64, as in Validate: no overflow for any int64 time.
	if e.TimeMs > ref {
		if d := uint64(e.TimeMs) - uint64(ref); d > uint64(l.MaxSkew.Milliseconds()) {
			return &InvalidEventError{Reason: ReasonTimeSkew,
				Detail: fmt.Sprintf("event time %d is %s ahead of its record's Kafka timestamp %d (when it was produced); limit %s (is it in microseconds instead of milliseconds?)",
					e.TimeMs, msString(d), ref, l.MaxSkew)}
		}
	}
	return nil
}

// validateKey applies the key checks, in Validate's order.
func (l Limits) validateKey(e *AccessEvent) error {
	if len(e.Key) == 0 {
		return &InvalidEventError{Reason: ReasonEmptyKey}
	}
	maxKey := l.MaxKeyBytes
	if maxKey <= 0 {
		maxKey = DefaultMaxKeyBytes
	}
	if len(e.Key) > maxKey {
		return &InvalidEventError{Reason: ReasonKeyTooLong,
			Detail: fmt.Sprintf("key is %d bytes, limit %d", len(e.Key), maxKey)}
	}
	if !l.AllowBinaryKeys && !utf8.ValidString(e.Key) {
		return &InvalidEventError{Reason: ReasonKeyNotUTF8,
			Detail: "key is not valid UTF-8; to accept binary keys set events.codec: binary and events.allow_binary_keys: true"}
	}
	return nil
}

// checkTimeSet refuses an event with no time, and one before MinTimeMs.
func checkTimeSet(e *AccessEvent) error {
	if e.TimeMs == 0 {
		return &InvalidEventError{Reason: ReasonMissingTime,
			Detail: "event has no time (ts is 0 or missing)"}
	}
	if e.TimeMs < MinTimeMs {
		return &InvalidEventError{Reason: ReasonTimeSkew,
			Detail: fmt.Sprintf("event time %d is before %d (2001-09-09); is it in seconds instead of milliseconds?", e.TimeMs, MinTimeMs)}
	}
	return nil
}

// msString formats a millisecond count as a duration when it fits one.
func msString(ms uint64) string {
	if ms > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return fmt.Sprintf("%dms", ms)
	}
	return (time.Duration(ms) * time.Millisecond).String()
}
