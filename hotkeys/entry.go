package hotkeys

import (
	"fmt"
	"strings"
	"time"
)

// Source says who put an entry in the registry.
type Source uint8

const (
	// SourceDetector: detect found the key hot.
	SourceDetector Source = iota + 1
	// SourceManual: an operator promoted (or demoted) the key through the
	// control plane; a manual entry wins over the detector's until its TTL
	// ends.
	SourceManual
)

func (s Source) String() string {
	switch s {
	case SourceDetector:
		return "detector"
	case SourceManual:
		return "manual"
	}
	return "unknown"
}

// Mitigation is what an entry asks applications to do about a hot key.
type Mitigation uint8

const (
	// MitigationNone: nothing is suggested (a demoted key).
	MitigationNone Mitigation = iota
	// MitigationLocalCache: serve the key's reads from the in-process cache.
	MitigationLocalCache
	// MitigationSplit: spread the key's writes over SplitFactor physical keys.
	MitigationSplit
	// MitigationCoalesce: collapse concurrent misses into one upstream call,
	// caching nothing.
	MitigationCoalesce
)

func (m Mitigation) String() string {
	switch m {
	case MitigationNone:
		return "none"
	case MitigationLocalCache:
		return "local_cache"
	case MitigationSplit:
		return "split"
	case MitigationCoalesce:
		return "coalesce"
	}
	return "unknown"
}

// Status is an entry's state as an OnChange callback sees it.
type Status uint8

const (
	// StatusHot: the key is hot now (new, or refreshed with a new rate).
	StatusHot Status = iota + 1
	// StatusCooled: the detector saw the key cool down, a manual entry
	// was removed, or a manual demote hid the key; the key left the set.
	StatusCooled
	// StatusExpired: the entry's TTL ended without a new record; the key
	// left the set.
	StatusExpired
)

func (s Status) String() string {
	switch s {
	case StatusHot:
		return "hot"
	case StatusCooled:
		return "cooled"
	case StatusExpired:
		return "expired"
	}
	return "unknown"
}

// Entry is one hot key as the registry holds it. Entries are values: the
// follower hands out copies, and an entry in the set never changes (a
// refresh replaces it).
type Entry struct {
	// App and Key are the hot key: Key is its raw bytes, any bytes.
	App, Key string
	// KeyHash is the 64-bit xxh3 hash of Key, as the registry's key_hash
	// holds it in hex: the only form of the key in metric labels and logs.
	KeyHash uint64
	// Source is who put the entry there.
	Source Source
	// Status is StatusHot for an entry in the set; OnChange also sees
	// StatusCooled and StatusExpired.
	Status Status
	// Mitigation and SplitFactor are what applications should do; SplitFactor
	// is a power of two ≥ 2 for MitigationSplit, 0 otherwise.
	Mitigation  Mitigation
	SplitFactor int
	// Rate is the key's current rate in events per second as the detector
	// last published it (0 on a manual entry), and PeakRate the highest it
	// published while the key stayed hot.
	Rate, PeakRate float64
	// Onset is the event time at which the key turned hot (detector) or
	// the time it was promoted (manual); Detected is when the record was
	// published.
	Onset, Detected time.Time
	// TTL is how long the entry lasts without a new record (0: until the
	// detector says it cooled), and Expires the instant it ends (zero when
	// TTL is 0).
	TTL     time.Duration
	Expires time.Time
	// LocalTTL, when not 0, overrides the local cache's TTL for this key.
	LocalTTL time.Duration
}

// MarshalText writes s as String does, so that JSON carries "detector" or
// "manual".
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (s *Source) UnmarshalText(b []byte) error {
	return unmarshalEnum(b, s, "source", SourceDetector, SourceManual)
}

// MarshalText writes m as String does ("local_cache", "split", ...).
func (m Mitigation) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (m *Mitigation) UnmarshalText(b []byte) error {
	return unmarshalEnum(b, m, "mitigation", MitigationNone, MitigationLocalCache, MitigationSplit, MitigationCoalesce)
}

// MarshalText writes s as String does ("hot", "cooled", "expired").
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (s *Status) UnmarshalText(b []byte) error {
	return unmarshalEnum(b, s, "status", StatusHot, StatusCooled, StatusExpired)
}

func unmarshalEnum[T interface {
	~uint8
	String() string
}](b []byte, dst *T, what string, values ...T) error {
	for _, v := range values {
		if v.String() == string(b) {
			*dst = v
			return nil
		}
	}
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = v.String()
	}
	return fmt.Errorf("hotkeys: %s %q, want one of %s", what, b, strings.Join(names, ", "))
}
