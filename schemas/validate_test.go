package schemas

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	const now = int64(1767225600000)
	day := (24 * time.Hour).Milliseconds()
	ok := func(mod func(*AccessEvent)) AccessEvent {
		e := AccessEvent{TimeMs: now, Key: "k"}
		if mod != nil {
			mod(&e)
		}
		return e
	}
	tests := []struct {
		name   string
		limits *Limits // nil: DefaultLimits()
		e      AccessEvent
		want   Reason // "" means valid
		detail string
	}{
		{name: "valid", e: ok(nil)},
		{name: "empty key", e: ok(func(e *AccessEvent) { e.Key = "" }), want: ReasonEmptyKey},
		{name: "key at default limit", e: ok(func(e *AccessEvent) { e.Key = strings.Repeat("k", 1024) })},
		{name: "key over default limit", e: ok(func(e *AccessEvent) { e.Key = strings.Repeat("k", 1025) }),
			want: ReasonKeyTooLong, detail: "key is 1025 bytes, limit 1024"},
		{name: "key at custom limit", limits: &Limits{MaxKeyBytes: 4}, e: ok(func(e *AccessEvent) { e.Key = "abcd" })},
		{name: "key over custom limit", limits: &Limits{MaxKeyBytes: 4}, e: ok(func(e *AccessEvent) { e.Key = "abcde" }),
			want: ReasonKeyTooLong, detail: "limit 4"},
		{name: "negative limit means default", limits: &Limits{MaxKeyBytes: -1},
			e: ok(func(e *AccessEvent) { e.Key = strings.Repeat("k", 1025) }), want: ReasonKeyTooLong},
		{name: "non-UTF-8 key", e: ok(func(e *AccessEvent) { e.Key = "a\xffb" }), want: ReasonKeyNotUTF8},
		{name: "non-UTF-8 key allowed", limits: &Limits{AllowBinaryKeys: true}, e: ok(func(e *AccessEvent) { e.Key = "a\xffb" })},
		{name: "empty beats too long and UTF-8 checks", e: ok(func(e *AccessEvent) { e.Key = ""; e.TimeMs = 0 }), want: ReasonEmptyKey},
		{name: "too long checked before UTF-8", e: ok(func(e *AccessEvent) { e.Key = strings.Repeat("\xff", 2000) }), want: ReasonKeyTooLong},
		{name: "missing time", e: ok(func(e *AccessEvent) { e.TimeMs = 0 }), want: ReasonMissingTime},
		{name: "missing time accepted when skew disabled", limits: &Limits{MaxSkew: -1}, e: ok(func(e *AccessEvent) { e.TimeMs = 0 })},
		{name: "at default skew in the past", e: ok(func(e *AccessEvent) { e.TimeMs = now - 7*day })},
		{name: "past default skew", e: ok(func(e *AccessEvent) { e.TimeMs = now - 7*day - 1 }),
			want: ReasonTimeSkew, detail: "168h0m0.001s from now"},
		{name: "future default skew", e: ok(func(e *AccessEvent) { e.TimeMs = now + 7*day + 1 }), want: ReasonTimeSkew},
		{name: "seconds instead of ms", e: ok(func(e *AccessEvent) { e.TimeMs = now / 1000 }), want: ReasonTimeSkew,
			detail: "in seconds instead of milliseconds"},
		{name: "at MinTimeMs", limits: &Limits{MaxSkew: 100 * 365 * 24 * time.Hour}, e: ok(func(e *AccessEvent) { e.TimeMs = MinTimeMs })},
		{name: "before MinTimeMs however wide the skew", limits: &Limits{MaxSkew: 100 * 365 * 24 * time.Hour},
			e: ok(func(e *AccessEvent) { e.TimeMs = MinTimeMs - 1 }), want: ReasonTimeSkew, detail: "before 1000000000000 (2001-09-09)"},
		{name: "far past skew", e: ok(func(e *AccessEvent) { e.TimeMs = now - 300*day }), want: ReasonTimeSkew,
			detail: "seconds or microseconds"},
		{name: "microseconds instead of ms", e: ok(func(e *AccessEvent) { e.TimeMs = now * 1000 }), want: ReasonTimeSkew},
		{name: "custom skew", limits: &Limits{MaxSkew: time.Minute}, e: ok(func(e *AccessEvent) { e.TimeMs = now + 60_001 }),
			want: ReasonTimeSkew, detail: "limit 1m0s"},
		{name: "within custom skew", limits: &Limits{MaxSkew: time.Minute}, e: ok(func(e *AccessEvent) { e.TimeMs = now - 60_000 })},
		{name: "skew disabled", limits: &Limits{MaxSkew: -1}, e: ok(func(e *AccessEvent) { e.TimeMs = 1 })},
		{name: "zero MaxSkew disables the skew check", limits: &Limits{MaxKeyBytes: 8}, e: ok(func(e *AccessEvent) { e.TimeMs = 1 })},
		{name: "zero Limits: default key checks", limits: &Limits{}, e: ok(func(e *AccessEvent) { e.Key = strings.Repeat("k", 1025) }),
			want: ReasonKeyTooLong, detail: "limit 1024"},
		{name: "zero Limits: no time check", limits: &Limits{}, e: ok(func(e *AccessEvent) { e.TimeMs = 0 })},
		{name: "binary key refused names the settings", e: ok(func(e *AccessEvent) { e.Key = "\xff" }), want: ReasonKeyNotUTF8,
			detail: "events.codec: binary and events.allow_binary_keys: true"},
		{name: "min int64 time does not overflow", e: ok(func(e *AccessEvent) { e.TimeMs = math.MinInt64 }), want: ReasonTimeSkew},
		{name: "max int64 time does not overflow", e: ok(func(e *AccessEvent) { e.TimeMs = math.MaxInt64 }), want: ReasonTimeSkew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := DefaultLimits()
			if tt.limits != nil {
				l = *tt.limits
			}
			err := l.Validate(&tt.e, now)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var ie *InvalidEventError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tt.want, ie.Reason, "error: %v", err)
			require.ErrorContains(t, err, tt.detail)
		})
	}
}

// TestValidateProduced: an event read back from Kafka is judged against
// when its record was produced, and only ahead of it.
func TestValidateProduced(t *testing.T) {
	const now = int64(1767225600000)
	day := (24 * time.Hour).Milliseconds()
	tenMonths := 300 * day
	tests := []struct {
		name           string
		limits         *Limits // nil: DefaultLimits()
		ts, producedMs int64
		key            string // "" means "k"
		want           Reason // "" means valid
		detail         string
	}{
		{name: "live", ts: now - 10, producedMs: now},
		{name: "produced long ago, read now", ts: now - tenMonths, producedMs: now - tenMonths + 5},
		{name: "old event produced now (a backfill)", ts: now - tenMonths, producedMs: now},
		{name: "at the skew ahead", ts: now + 7*day, producedMs: now},
		{name: "past the skew ahead", ts: now + 7*day + 1, producedMs: now, want: ReasonTimeSkew,
			detail: "168h0m0.001s ahead of its record's Kafka timestamp 1767225600000"},
		{name: "ahead of a record produced long ago", ts: now - tenMonths + 8*day, producedMs: now - tenMonths, want: ReasonTimeSkew},
		{name: "microseconds instead of ms", ts: now * 1000, producedMs: now, want: ReasonTimeSkew, detail: "microseconds"},
		{name: "seconds instead of ms", ts: now / 1000, producedMs: now, want: ReasonTimeSkew, detail: "in seconds instead of milliseconds"},
		{name: "record stamped in the future is capped by now", ts: now + 30*day, producedMs: now + 30*day, want: ReasonTimeSkew,
			detail: "ahead of its record's Kafka timestamp 1767225600000"},
		{name: "no record timestamp: now", ts: now + 8*day, producedMs: -1, want: ReasonTimeSkew},
		{name: "no record timestamp, old event", ts: now - tenMonths, producedMs: 0},
		{name: "missing time", ts: 0, producedMs: now, want: ReasonMissingTime},
		{name: "skew disabled", limits: &Limits{}, ts: now * 1000, producedMs: now},
		{name: "custom skew", limits: &Limits{MaxSkew: time.Minute}, ts: now + 60_001, producedMs: now, want: ReasonTimeSkew, detail: "limit 1m0s"},
		{name: "key checked first", ts: now * 1000, producedMs: now, key: strings.Repeat("k", 1025), want: ReasonKeyTooLong},
		{name: "max int64 time does not overflow", ts: math.MaxInt64, producedMs: now, want: ReasonTimeSkew},
		{name: "min int64 time", ts: math.MinInt64, producedMs: now, want: ReasonTimeSkew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := DefaultLimits()
			if tt.limits != nil {
				l = *tt.limits
			}
			e := AccessEvent{TimeMs: tt.ts, Key: tt.key}
			if e.Key == "" {
				e.Key = "k"
			}
			err := l.ValidateProduced(&e, tt.producedMs, now)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tt.want, ReasonOf(err), "error: %v", err)
			require.ErrorContains(t, err, tt.detail)
		})
	}
}

func TestValidateMinInt64AgainstZeroNow(t *testing.T) {
	// |MinInt64 - 0| does not fit an int64: the old signed arithmetic
	// wrapped it to a negative distance and accepted the event.
	err := DefaultLimits().Validate(&AccessEvent{Key: "k", TimeMs: math.MinInt64}, 0)
	require.Equal(t, ReasonTimeSkew, ReasonOf(err))
}

func TestReasonOf(t *testing.T) {
	tests := []struct {
		err  error
		want Reason
	}{
		{&InvalidEventError{Reason: ReasonEmptyKey}, ReasonEmptyKey},
		{fmt.Errorf("decode: %w", &InvalidEventError{Reason: ReasonKeyTooLong}), ReasonKeyTooLong},
		{errors.New("boom"), ReasonParse},
		{nil, ReasonParse},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ReasonOf(tt.err), "%v", tt.err)
	}
}

func TestInvalidEventErrorMessage(t *testing.T) {
	require.Equal(t, "invalid event: empty_key", (&InvalidEventError{Reason: ReasonEmptyKey}).Error())
	require.Equal(t, "invalid event: parse: at offset 3", (&InvalidEventError{Reason: ReasonParse, Detail: "at offset 3"}).Error())
}

// TestDecodeThenValidate shows the documented path of a JSON record with no
// key: decoding succeeds and validation names the reason.
func TestDecodeThenValidate(t *testing.T) {
	var e AccessEvent
	require.NoError(t, DecodeJSON([]byte(`{"ts":1767225600000,"app":"shop"}`), &e))
	require.Equal(t, ReasonEmptyKey, ReasonOf(Limits{}.Validate(&e, 1767225600000)))
	require.NoError(t, DecodeJSON([]byte(`{"key":"k"}`), &e))
	require.Equal(t, ReasonMissingTime, ReasonOf(DefaultLimits().Validate(&e, 1767225600000)))
}
