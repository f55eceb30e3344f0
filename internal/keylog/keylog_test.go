package keylog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/schemas"
)

func line(t *testing.T, attr slog.Attr) map[string]any {
	t.Helper()
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).Info("m", attr)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &m))
	delete(m, "time")
	delete(m, "level")
	delete(m, "msg")
	return m
}

func TestAttr(t *testing.T) {
	const key = "user:alice@example.com"
	h := schemas.KeyHash(key)
	require.Equal(t, map[string]any{"key_hash": h}, line(t, Attr(key, false)), "hashed: no key")
	require.Equal(t, map[string]any{"key": key, "key_hash": h}, line(t, Attr(key, true)))
	require.Equal(t, map[string]any{"access_key_hash": h}, line(t, Named("access_key", key, false)))
	require.Equal(t, map[string]any{"access_key": key, "access_key_hash": h}, line(t, Named("access_key", key, true)))

	long := strings.Repeat("k", MaxRawBytes+10)
	got := line(t, Attr(long, true))
	require.Equal(t, strings.Repeat("k", MaxRawBytes)+"…", got["key"])
	require.Equal(t, schemas.KeyHash(long), got["key_hash"], "the hash is of the whole key")

	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("m", "app", "shop", Attr(key, false), "n", 1)
	require.Contains(t, b.String(), "app=shop key_hash="+h+" n=1")
	require.NotContains(t, b.String(), "alice")
}

func TestParsePolicy(t *testing.T) {
	raw, err := ParsePolicy("hash")
	require.NoError(t, err)
	require.False(t, raw)
	raw, err = ParsePolicy("raw")
	require.NoError(t, err)
	require.True(t, raw)
	_, err = ParsePolicy("Raw")
	require.EqualError(t, err, `"Raw" is not one of hash, raw`)
	_, err = ParsePolicy("")
	require.Error(t, err)
}
