package keylog

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/keyheat/keyheat/schemas"
)

// The values of log.keys.
const (
	// Hash shows a key as its key_hash only: the default.
	Hash = "hash"
	// Raw shows a key itself, with its key_hash beside it.
	Raw = "raw"
)

// Policies returns the values log.keys accepts, the default first.
func Policies() []string { return []string{Hash, Raw} }

// ParsePolicy returns whether policy, one of Policies, shows raw keys.
func ParsePolicy(policy string) (raw bool, err error) {
	if !slices.Contains(Policies(), policy) {
		return false, fmt.Errorf("%q is not one of %s", policy, strings.Join(Policies(), ", "))
	}
	return policy == Raw, nil
}

// MaxRawBytes bounds a raw key in a log line: a longer one is cut there
// and ends in "…" (its key_hash is of the whole key).
const MaxRawBytes = 256

// Attr returns the attribute a log line names an access key by:
// key_hash=<schemas.KeyHash(key)>, and with raw key=<key> before it.
func Attr(key string, raw bool) slog.Attr { return Named("key", key, raw) }

// Named is Attr under another name, for a line that names two keys
// (record_key and access_key): name_hash=<hash>, and with raw
// name=<key> before it.
func Named(name, key string, raw bool) slog.Attr {
	hash := slog.String(name+"_hash", schemas.KeyHash(key))
	if !raw {
		return hash
	}
	if len(key) > MaxRawBytes {
		key = key[:MaxRawBytes] + "…"
	}
	// A group with no name is inlined in its parent: two attributes
	// where one is expected.
	return slog.Attr{Value: slog.GroupValue(slog.String(name, key), hash)}
}
