package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Client statistics.
//
// Every few seconds an application's process publishes what its hotkeys
// components counted (hotkeys.StatsPublisher) as one ClientStats record on
// the client-stats topic, the record key being the client's ID, so that a
// compacted topic keeps each client's latest record. The control plane
// follows the topic and sums the latest records of the clients alive.
//
// Counters are cumulative: the whole-process ones since the component was
// built, a key's since the component began to hold it (a cache took it in,
// a splitter began to remember it). A reader that wants a rate subtracts
// two records of one client, and must expect a counter to start again from
// zero when the client restarts (StartedMs changes) or the key left and
// came back.

// ClientStatsVersion is the version of the ClientStats JSON format written
// today. Readers accept this version only.
const ClientStatsVersion = 1

// Bounds of a ClientStats record, which DecodeClientStats enforces so that
// a hostile or broken record costs a reader a bounded amount of memory.
const (
	// MaxClientStatsBytes is the largest record value accepted, checked
	// before it is parsed.
	MaxClientStatsBytes = 1 << 20
	// MaxClientStatsKeys is the most keys one record lists.
	MaxClientStatsKeys = 1024
	// MaxClientStatsKeyBytes is the longest key a record lists; a
	// publisher leaves longer keys out (and counts them in KeysOmitted).
	MaxClientStatsKeyBytes = 4096
	// MaxClientStatsNameBytes bounds a client ID and an app name.
	MaxClientStatsNameBytes = 256
	// MaxClientStatsIntervalMs bounds IntervalMs: a day.
	MaxClientStatsIntervalMs = 24 * 60 * 60 * 1000
	// maxClientStatsShards bounds a key's SplitShards.
	maxClientStatsShards = 1 << 16
)

// ClientStats is the value of a record on the client-stats topic (record
// key: the Client ID's bytes): one client's counters at one moment.
//
// JSON (AppendJSON / DecodeClientStats):
//
//	{"v":1,"client":"web-7/4121","app":"shop","time_ms":1767225600000,
//	 "interval_ms":5000,"started_ms":1767225000000,
//	 "cache":{"hits":90210,"misses":120,"loads":31,"coalesced":89,
//	  "load_errors":0,"cold_loads":5512,"stale_served":0,"timeouts":0,
//	  "entries":12,"following":true},
//	 "split":{"split_calls":4100,"passed_calls":70211,"keys":1,"folds":0,"fold_errors":0},
//	 "follower":{"entries":14,"lag":0,"ready":true,"failing":false,"decode_errors":0},
//	 "reporter":{"recorded":80000,"sent":79990,"failed":0,"dropped":10,"pending":0},
//	 "keys":[{"app":"shop","key":"product:42","hits":90000,"misses":100,
//	   "loads":25,"coalesced":75},
//	  {"app":"shop","key":"views:product:42","split_shards":8,"split_writes":4000,"split_reads":100}],
//	 "keys_omitted":0}
//
// "cache", "split", "follower" and "reporter" are present when the client
// has that component. In "keys" a counter that is 0 is omitted; "app" and
// "key" are always there. A key that is not UTF-8 also has "key_b64", its
// exact bytes in base64, which DecodeClientStats prefers (see rawkey.go).
type ClientStats struct {
	// Version is ClientStatsVersion.
	Version int `json:"v"`
	// Client identifies the publishing process (host/pid unless
	// configured): 1 to MaxClientStatsNameBytes bytes of UTF-8. It is the
	// record key.
	Client string `json:"client"`
	// App is the application the client serves, as configured; it may be
	// empty. Each key names its own app.
	App string `json:"app,omitempty"`
	// TimeMs is when the counters were read (Unix ms, the client's wall
	// clock), > 0.
	TimeMs int64 `json:"time_ms"`
	// IntervalMs is how often the client publishes, 1 to
	// MaxClientStatsIntervalMs: a record older than a few intervals comes
	// from a client that stopped.
	IntervalMs int64 `json:"interval_ms"`
	// StartedMs is when the publisher was built (Unix ms), ≥ 0: the
	// counters of a client whose StartedMs changed started again from 0.
	StartedMs int64 `json:"started_ms"`

	Cache    *ClientCacheTotals    `json:"cache,omitempty"`
	Split    *ClientSplitTotals    `json:"split,omitempty"`
	Follower *ClientFollowerTotals `json:"follower,omitempty"`
	Reporter *ClientReporterTotals `json:"reporter,omitempty"`

	// Keys are the keys the client's cache holds or its splitter
	// remembers now, the busiest first (by their counters' growth since
	// the client's previous record), at most MaxClientStatsKeys, each
	// (App, Key) once.
	Keys []ClientStatsKey `json:"keys,omitempty"`
	// KeysOmitted counts the keys held now and not in Keys: beyond the
	// publisher's cap, or with a key or app too long (or an app not
	// UTF-8) to be listed.
	KeysOmitted int `json:"keys_omitted,omitempty"`
}

// ClientCacheTotals are a hotkeys.Cache's counters (hotkeys.CacheStats).
type ClientCacheTotals struct {
	// Hits are Gets of local-cache hot keys served from the process,
	// Misses those that found no fresh value and waited for a load.
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
	// Loads are the loads of hot keys the cache started (upstream calls);
	// Coalesced the Gets that joined a load another Get had started.
	Loads     uint64 `json:"loads"`
	Coalesced uint64 `json:"coalesced"`
	// LoadErrors are the loads that returned an error; ColdLoads the Gets
	// of keys the cache does not serve (not hot, or split).
	LoadErrors uint64 `json:"load_errors"`
	ColdLoads  uint64 `json:"cold_loads"`
	// StaleServed and Timeouts are Gets that waited MaxWait and got a
	// stale value, or none.
	StaleServed uint64 `json:"stale_served"`
	Timeouts    uint64 `json:"timeouts"`
	// Entries are the keys held when the record was made.
	Entries uint64 `json:"entries"`
	// Following reports that the cache followed invalidations, and so
	// kept values.
	Following bool `json:"following"`
}

// ClientSplitTotals are a hotkeys.Splitter's counters (hotkeys.SplitStats).
type ClientSplitTotals struct {
	// SplitCalls are calls on split keys, every operation summed;
	// PassedCalls calls passed through to the key itself.
	SplitCalls  uint64 `json:"split_calls"`
	PassedCalls uint64 `json:"passed_calls"`
	// Keys are the keys the splitter remembered when the record was made.
	Keys uint64 `json:"keys"`
	// Folds and FoldErrors count the folds completed and failed.
	Folds      uint64 `json:"folds"`
	FoldErrors uint64 `json:"fold_errors"`
}

// ClientFollowerTotals are a hotkeys.Follower's state (hotkeys.FollowerStats).
type ClientFollowerTotals struct {
	// Entries is the number of keys the follower's set held.
	Entries uint64 `json:"entries"`
	// Lag is the offsets between the follower's position and the
	// registry's high watermarks, summed over partitions.
	Lag uint64 `json:"lag"`
	// Ready reports that the follower had read the registry up to where it
	// ended when it started; Failing that its latest fetch failed.
	Ready   bool `json:"ready"`
	Failing bool `json:"failing"`
	// DecodeErrors are the registry records it skipped as undecodable.
	DecodeErrors uint64 `json:"decode_errors"`
}

// ClientReporterTotals are a hotkeys.Reporter's counters
// (hotkeys.ReporterStats).
type ClientReporterTotals struct {
	// Recorded are Record calls; Sent the events Kafka acknowledged;
	// Failed those it did not; Dropped those never buffered (buffers
	// full, invalid, or after Close); Pending those held.
	Recorded uint64 `json:"recorded"`
	Sent     uint64 `json:"sent"`
	Failed   uint64 `json:"failed"`
	Dropped  uint64 `json:"dropped"`
	Pending  uint64 `json:"pending"`
}

// ClientStatsKey is what one client counted of one key, each counter since
// the component holding the key took it in.
type ClientStatsKey struct {
	// App is UTF-8, at most MaxClientStatsNameBytes; Key 1 to
	// MaxClientStatsKeyBytes of any bytes.
	App string `json:"app"`
	Key string `json:"key"`
	// Hits, Misses, Loads and Coalesced are the cache's
	// (hotkeys.KeyStats): Gets served locally, Gets that found no fresh
	// value, loads started, and Gets that joined a load in flight.
	Hits      uint64 `json:"hits,omitempty"`
	Misses    uint64 `json:"misses,omitempty"`
	Loads     uint64 `json:"loads,omitempty"`
	Coalesced uint64 `json:"coalesced,omitempty"`
	// SplitShards, SplitWrites and SplitReads are the splitter's
	// (hotkeys.SplitKeyStats): the shards it reads the key with, its
	// split writes acknowledged and its split reads returned.
	SplitShards int    `json:"split_shards,omitempty"`
	SplitWrites uint64 `json:"split_writes,omitempty"`
	SplitReads  uint64 `json:"split_reads,omitempty"`
}

type clientStatsKeyFields ClientStatsKey

type clientStatsKeyJSON struct {
	clientStatsKeyFields
	KeyB64 []byte `json:"key_b64,omitempty"`
}

// MarshalJSON writes k's fields, with "key_b64" when Key is not UTF-8.
func (k ClientStatsKey) MarshalJSON() ([]byte, error) {
	return json.Marshal(clientStatsKeyJSON{clientStatsKeyFields(k), rawIfNotText(k.Key)})
}

// UnmarshalJSON reads what MarshalJSON writes; "key_b64", when present, is
// the key.
func (k *ClientStatsKey) UnmarshalJSON(b []byte) error {
	var j clientStatsKeyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*k = ClientStatsKey(j.clientStatsKeyFields)
	if j.KeyB64 != nil {
		k.Key = string(j.KeyB64)
	}
	return nil
}

// ValidClientStatsName reports what makes s unusable as a client ID or an
// app name of a ClientStats record (too long, not UTF-8), or nil. The
// empty string is valid here; a client ID must also be non-empty.
func ValidClientStatsName(s string) error {
	if len(s) > MaxClientStatsNameBytes {
		return fmt.Errorf("%d bytes, over %d", len(s), MaxClientStatsNameBytes)
	}
	if !utf8.ValidString(s) {
		return errors.New("not UTF-8")
	}
	return nil
}

// Validate reports what makes s a record readers reject, or nil. It is
// what AppendJSON and DecodeClientStats check (DecodeClientStats checks the
// size first).
func (s *ClientStats) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Version != ClientStatsVersion {
		bad("version %d, this reader knows %d", s.Version, ClientStatsVersion)
	}
	if s.Client == "" {
		bad("client is empty")
	} else if err := ValidClientStatsName(s.Client); err != nil {
		bad("client: %w", err)
	}
	if err := ValidClientStatsName(s.App); err != nil {
		bad("app: %w", err)
	}
	if s.TimeMs <= 0 || s.TimeMs > maxMs {
		bad("time_ms is %d, want the Unix ms the counters were read", s.TimeMs)
	}
	if s.IntervalMs <= 0 || s.IntervalMs > MaxClientStatsIntervalMs {
		bad("interval_ms is %d, want 1..%d", s.IntervalMs, MaxClientStatsIntervalMs)
	}
	if s.StartedMs < 0 || s.StartedMs > maxMs {
		bad("started_ms is %d, want ≥ 0", s.StartedMs)
	}
	if s.KeysOmitted < 0 {
		bad("keys_omitted is %d, want ≥ 0", s.KeysOmitted)
	}
	if len(s.Keys) > MaxClientStatsKeys {
		bad("%d keys, over %d", len(s.Keys), MaxClientStatsKeys)
	} else if err := validClientStatsKeys(s.Keys); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("client stats: %w", errors.Join(errs...))
}

// validClientStatsKeys checks each key and that none is listed twice (a
// reader summing keys would count it twice). It names a bad key by its
// index only: logs must not carry keys.
func validClientStatsKeys(keys []ClientStatsKey) error {
	type appKey struct{ app, key string }
	seen := make(map[appKey]struct{}, len(keys))
	for i := range keys {
		k := &keys[i]
		switch {
		case k.Key == "" || len(k.Key) > MaxClientStatsKeyBytes:
			return fmt.Errorf("keys[%d]: key of %d bytes, want 1..%d", i, len(k.Key), MaxClientStatsKeyBytes)
		case ValidClientStatsName(k.App) != nil:
			return fmt.Errorf("keys[%d]: app: %w", i, ValidClientStatsName(k.App))
		case k.SplitShards < 0 || k.SplitShards > maxClientStatsShards:
			return fmt.Errorf("keys[%d]: split_shards is %d, want 0..%d", i, k.SplitShards, maxClientStatsShards)
		}
		ak := appKey{k.App, k.Key}
		if _, dup := seen[ak]; dup {
			return fmt.Errorf("keys[%d]: the key is listed twice", i)
		}
		seen[ak] = struct{}{}
	}
	return nil
}

// AppendJSON appends s's JSON form to dst. It refuses a record Validate
// rejects or whose encoding is over MaxClientStatsBytes, so no reader ever
// gets one.
func (s *ClientStats) AppendJSON(dst []byte) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return dst, fmt.Errorf("encode %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return dst, fmt.Errorf("encode client stats: %w", err)
	}
	if len(b) > MaxClientStatsBytes {
		return dst, fmt.Errorf("encode client stats: %d bytes, over %d: list fewer keys", len(b), MaxClientStatsBytes)
	}
	return append(dst, b...), nil
}

// ErrClientStatsTooLarge is returned (wrapped) by DecodeClientStats for a
// value over MaxClientStatsBytes, which it does not parse.
var ErrClientStatsTooLarge = fmt.Errorf("client stats record over %d bytes", MaxClientStatsBytes)

// DecodeClientStats decodes a client-stats record's value and validates it
// (see Validate). A value over MaxClientStatsBytes is refused before it is
// parsed. A tombstone (nil value) is not a record: callers check for it
// before decoding.
func DecodeClientStats(src []byte) (*ClientStats, error) {
	if len(src) > MaxClientStatsBytes {
		return nil, fmt.Errorf("decode client stats: %w (%d bytes)", ErrClientStatsTooLarge, len(src))
	}
	var w clientStatsWire
	if err := json.Unmarshal(src, &w); err != nil {
		return nil, fmt.Errorf("decode client stats: %w", err)
	}
	s := ClientStats(w.clientStatsFields)
	keys, err := decodeClientStatsKeys(w.Keys)
	if err != nil {
		return nil, fmt.Errorf("decode client stats: %w", err)
	}
	s.Keys = keys
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("decode %w", err)
	}
	return &s, nil
}

type clientStatsFields ClientStats

// clientStatsWire holds "keys" undecoded (its Keys shadows the embedded
// one), so that decodeClientStatsKeys can stop at MaxClientStatsKeys: a
// megabyte of "{}," would otherwise become 350,000 keys in memory before
// Validate saw their number.
type clientStatsWire struct {
	clientStatsFields
	Keys json.RawMessage `json:"keys"`
}

// decodeClientStatsKeys decodes a "keys" array of at most
// MaxClientStatsKeys elements; null or absent is none.
func decodeClientStatsKeys(raw json.RawMessage) ([]ClientStatsKey, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, errors.New("keys is not an array")
	}
	var keys []ClientStatsKey
	for dec.More() {
		if len(keys) == MaxClientStatsKeys {
			return nil, fmt.Errorf("over %d keys", MaxClientStatsKeys)
		}
		keys = append(keys, ClientStatsKey{})
		if err := dec.Decode(&keys[len(keys)-1]); err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", len(keys)-1, err)
		}
	}
	return keys, nil
}
