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
	ReasonTimeSkew    Reason = "time_skew"     // event time too far from now
	ReasonMissingTime Reason = "missing_time"  // the format demands a time and the line had none
	ReasonLineTooLong Reason = "line_too_long" // a line over the source's line limit; only its start is kept
)

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

// DefaultMaxSkew is how far an event time may be from now before it is
// rejected by default. Wide enough for replays of a recent day, narrow
// enough to catch seconds-vs-milliseconds mistakes.
const DefaultMaxSkew = 7 * 24 * time.Hour

// Limits are the checks Validate applies. The mapstructure tags are the
// option names of the config file's events section. The zero value checks
// keys (DefaultMaxKeyBytes, UTF-8) and not times; DefaultLimits checks
// times as well.
type Limits struct {
	// MaxKeyBytes is the longest key accepted; 0 (or negative) means
	// DefaultMaxKeyBytes.
	MaxKeyBytes int `mapstructure:"max_key_bytes"`
	// MaxSkew is how far TimeMs may be from the now passed to Validate;
	// 0 (or negative) disables the check, for replays of old logs.
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

// Validate checks e against l, using now (Unix ms) as the reference for the
// time-skew check. The error is always an *InvalidEventError, checked in
// this order: ReasonEmptyKey, ReasonKeyTooLong, ReasonKeyNotUTF8 (unless
// AllowBinaryKeys), then, when MaxSkew is positive, ReasonMissingTime for
// TimeMs 0 (a decoder's "no time given") and ReasonTimeSkew for a time
// more than MaxSkew away from nowMs.
func (l Limits) Validate(e *AccessEvent, nowMs int64) error {
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
	if skew := l.MaxSkew; skew > 0 {
		if e.TimeMs == 0 {
			return &InvalidEventError{Reason: ReasonMissingTime,
				Detail: "event has no time (ts is 0 or missing)"}
		}
		// |TimeMs - nowMs| computed in uint64 cannot overflow, even for
		// times near the ends of int64 (a corrupt record, a µs-vs-ms mixup).
		var d uint64
		if e.TimeMs >= nowMs {
			d = uint64(e.TimeMs) - uint64(nowMs)
		} else {
			d = uint64(nowMs) - uint64(e.TimeMs)
		}
		if d > uint64(skew.Milliseconds()) {
			return &InvalidEventError{Reason: ReasonTimeSkew,
				Detail: fmt.Sprintf("event time %d is %s from now %d; limit %s (is it in seconds or microseconds instead of milliseconds?)",
					e.TimeMs, msString(d), nowMs, skew)}
		}
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
