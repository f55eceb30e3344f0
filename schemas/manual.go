package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Manual registry entries.
//
// Besides detect's records, keyheat.hotkeys carries manual entries: an
// operator (through a control plane) promotes a key to hot, with a
// mitigation of their choosing, or demotes a key the detector found hot.
// A manual entry overrides the detector's state for its key until it
// expires:
//
//   - promote: the key is hot, with the entry's mitigation, until
//     CreatedMs + TTLMs, whatever the detector says;
//   - demote: the key is not hot until CreatedMs + TTLMs, whatever the
//     detector says.
//
// After that instant the detector's state for the key rules again, with no
// new record needed. A manual entry is stored under its own record key,
// ManualRecordKey(app, key), so compaction keeps the latest manual entry
// and the latest detector record of a key side by side. A tombstone (a
// record with a nil value) on ManualRecordKey(app, key) removes the
// override before it expires.

// ManualVersion is the version of the ManualEntry JSON format written
// today. Readers accept this version only.
const ManualVersion = 1

// Manual entry actions.
const (
	// ManualPromote: the key is hot with the entry's mitigation until the
	// entry expires.
	ManualPromote = "promote"
	// ManualDemote: the key is not hot until the entry expires.
	ManualDemote = "demote"
)

// manualKeyPrefix starts every manual record key. HotKeyRecordKey starts
// with the decimal length of the app, a digit, so a record key starting
// with "m" is a manual entry's and no detector record key is one.
const manualKeyPrefix = "m:"

// ManualRecordKey is the Kafka record key of a key's manual entry on
// keyheat.hotkeys: "m:" followed by HotKeyRecordKey(app, key)
// ("m:4:shopproduct:42"). It never equals a detector record key, whose
// first byte is a digit, so the two live side by side under compaction.
func ManualRecordKey(app, key string) []byte {
	return append([]byte(manualKeyPrefix), HotKeyRecordKey(app, key)...)
}

// IsManualRecordKey reports whether recordKey is a manual entry's record
// key (see ManualRecordKey) rather than a detector record's.
func IsManualRecordKey(recordKey []byte) bool {
	return bytes.HasPrefix(recordKey, []byte(manualKeyPrefix))
}

// ParseHotKeyRecordKey returns the app and key of a detector record key,
// the inverse of HotKeyRecordKey. It rejects a key HotKeyRecordKey does not
// produce: no length prefix, a length with a leading zero or sign, or a
// length longer than what follows. Its errors do not quote the key, which
// logs must not carry.
//
// A reader needs it for tombstones, whose value is empty: the record key
// alone says which key left the registry.
func ParseHotKeyRecordKey(recordKey []byte) (app, key string, err error) {
	n, rest, ok := parseRecordKeyLen(recordKey)
	if !ok {
		return "", "", errors.New("parse hot-key record key: want <len(app)>:<app><key>")
	}
	return string(rest[:n]), string(rest[n:]), nil
}

// ParseManualRecordKey returns the app and key of a manual record key, the
// inverse of ManualRecordKey.
func ParseManualRecordKey(recordKey []byte) (app, key string, err error) {
	rest, ok := bytes.CutPrefix(recordKey, []byte(manualKeyPrefix))
	if ok {
		if n, rest, ok := parseRecordKeyLen(rest); ok {
			return string(rest[:n]), string(rest[n:]), nil
		}
	}
	return "", "", errors.New("parse manual record key: want m:<len(app)>:<app><key>")
}

// parseRecordKeyLen splits "<n>:<rest>" where n is a canonical decimal (no
// sign, no leading zero) no larger than len(rest).
func parseRecordKeyLen(b []byte) (n int, rest []byte, ok bool) {
	i := bytes.IndexByte(b, ':')
	// 10 digits hold any app length a record key can have.
	if i < 1 || i > 10 || (i > 1 && b[0] == '0') {
		return 0, nil, false
	}
	for _, c := range b[:i] {
		if c < '0' || c > '9' {
			return 0, nil, false
		}
		n = n*10 + int(c-'0')
	}
	rest = b[i+1:]
	if n > len(rest) {
		return 0, nil, false
	}
	return n, rest, true
}

// ManualEntry is the value of a manual record on keyheat.hotkeys (record
// key ManualRecordKey(App, Key)).
//
// JSON (AppendJSON / DecodeManualEntry):
//
//	{"v":1,"action":"promote","app":"shop","key":"product:42",
//	 "mitigation":{"kind":"split","split":8},"ttl_ms":600000,
//	 "created_ms":1767225600000,"local_ttl_ms":2000,
//	 "by":"alice","reason":"flash sale"}
//
// "mitigation" is present on a promote only; "local_ttl_ms", "by" and
// "reason" are omitted when empty. A key that is not UTF-8 also has
// "key_b64", its exact bytes in base64, which DecodeManualEntry prefers
// (see rawkey.go).
type ManualEntry struct {
	// Version is ManualVersion.
	Version int `json:"v"`
	// Action is ManualPromote or ManualDemote.
	Action string `json:"action"`
	// App and Key name the key; App is UTF-8, Key any bytes.
	App string `json:"app"`
	Key string `json:"key"`
	// Mitigation is what applications do about a promoted key: Kind
	// MitigationLocalCache, MitigationSplit (with Split a power of two
	// ≥ 2) or MitigationCoalesce. Required on a promote, absent on a
	// demote.
	Mitigation *Mitigation `json:"mitigation,omitempty"`
	// TTLMs is how long the entry lasts from CreatedMs, > 0: the override
	// ends at CreatedMs + TTLMs (Unix ms).
	TTLMs int64 `json:"ttl_ms"`
	// CreatedMs is the wall-clock time (Unix ms) the entry was made, > 0.
	CreatedMs int64 `json:"created_ms"`
	// LocalTTLMs, when > 0, overrides the app's local-cache TTL for the
	// key while the promote lasts. Promote only.
	LocalTTLMs int64 `json:"local_ttl_ms,omitempty"`
	// By and Reason say who made the entry and why, for people.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ExpiresMs is the instant (Unix ms) the entry stops overriding the
// detector: CreatedMs + TTLMs.
func (m *ManualEntry) ExpiresMs() int64 { return m.CreatedMs + m.TTLMs }

// Validate reports what makes m an entry readers reject, or nil. It is
// what AppendJSON and DecodeManualEntry check.
func (m *ManualEntry) Validate() error {
	var errs []error
	if m.Version != ManualVersion {
		errs = append(errs, fmt.Errorf("version %d, this reader knows %d", m.Version, ManualVersion))
	}
	if !utf8.ValidString(m.App) {
		errs = append(errs, errors.New("app is not UTF-8"))
	}
	if m.TTLMs <= 0 {
		errs = append(errs, fmt.Errorf("ttl_ms is %d, want > 0: a manual entry always ends", m.TTLMs))
	}
	if m.CreatedMs <= 0 {
		errs = append(errs, fmt.Errorf("created_ms is %d, want the Unix ms the entry was made", m.CreatedMs))
	}
	if m.TTLMs > 0 && m.CreatedMs > 0 && m.CreatedMs > maxMs-m.TTLMs {
		errs = append(errs, fmt.Errorf("created_ms %d + ttl_ms %d overflows", m.CreatedMs, m.TTLMs))
	}
	if m.LocalTTLMs < 0 {
		errs = append(errs, fmt.Errorf("local_ttl_ms is %d, want ≥ 0", m.LocalTTLMs))
	}
	switch m.Action {
	case ManualPromote:
		if err := ValidateMitigation(m.Mitigation); err != nil {
			errs = append(errs, err)
		}
	case ManualDemote:
		if m.Mitigation != nil {
			errs = append(errs, errors.New("a demote has no mitigation"))
		}
		if m.LocalTTLMs != 0 {
			errs = append(errs, errors.New("a demote has no local_ttl_ms"))
		}
	default:
		errs = append(errs, fmt.Errorf("action %q is not %q or %q", m.Action, ManualPromote, ManualDemote))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("manual entry: %w", errors.Join(errs...))
}

// maxMs bounds CreatedMs + TTLMs so that it stays an int64 and a
// time.Time built from it (time.UnixMilli) stays meaningful.
const maxMs = 1<<62 - 1

// ValidateMitigation reports what makes m a mitigation readers reject, or
// nil: m is nil, its Kind is not MitigationLocalCache, MitigationSplit or
// MitigationCoalesce, or Split is not a power of two ≥ 2 for
// MitigationSplit (and not 0 for the other kinds).
func ValidateMitigation(m *Mitigation) error {
	if m == nil {
		return errors.New("mitigation is missing")
	}
	switch m.Kind {
	case MitigationSplit:
		if m.Split < 2 || m.Split&(m.Split-1) != 0 {
			return fmt.Errorf("mitigation split is %d, want a power of two ≥ 2", m.Split)
		}
	case MitigationLocalCache, MitigationCoalesce:
		if m.Split != 0 {
			return fmt.Errorf("mitigation %s has split %d, only %s has one", m.Kind, m.Split, MitigationSplit)
		}
	default:
		return fmt.Errorf("mitigation kind %q is not %q, %q or %q", m.Kind, MitigationLocalCache, MitigationSplit, MitigationCoalesce)
	}
	return nil
}

// AppendJSON appends m's JSON form to dst. It refuses an entry Validate
// rejects, so no reader ever gets one.
func (m *ManualEntry) AppendJSON(dst []byte) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return dst, fmt.Errorf("encode %w", err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return dst, fmt.Errorf("encode manual entry: %w", err)
	}
	return append(dst, b...), nil
}

// DecodeManualEntry decodes a manual record's value and validates it (see
// Validate). A tombstone (nil value) is not an entry: the override was
// removed; callers check for it before decoding.
func DecodeManualEntry(src []byte) (*ManualEntry, error) {
	var m ManualEntry
	if err := json.Unmarshal(src, &m); err != nil {
		return nil, fmt.Errorf("decode manual entry: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("decode %w", err)
	}
	return &m, nil
}

type manualFields ManualEntry

type manualJSON struct {
	manualFields
	KeyB64 []byte `json:"key_b64,omitempty"`
}

// MarshalJSON writes m's fields, with "key_b64" when Key is not UTF-8.
func (m ManualEntry) MarshalJSON() ([]byte, error) {
	return json.Marshal(manualJSON{manualFields(m), rawIfNotText(m.Key)})
}

// UnmarshalJSON reads what MarshalJSON writes; "key_b64", when present, is
// the key.
func (m *ManualEntry) UnmarshalJSON(b []byte) error {
	var j manualJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = ManualEntry(j.manualFields)
	if j.KeyB64 != nil {
		m.Key = string(j.KeyB64)
	}
	return nil
}
