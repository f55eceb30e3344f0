package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// The fuzz targets' seed corpora live in testdata/fuzz/<FuzzName>/. CI runs
// each for a few seconds, e.g.
//
//	go test -run '^$' -fuzz '^FuzzDecodeJSON$' -fuzztime 10s ./schemas/

// FuzzDecodeJSON: DecodeJSON never panics; it accepts only valid JSON; its
// strings agree with encoding/json's; and what it decodes survives a round
// trip through both codecs.
func FuzzDecodeJSON(f *testing.F) {
	f.Add(AppendJSON(nil, &fullEvent))
	f.Fuzz(func(t *testing.T, data []byte) {
		var e AccessEvent
		err := DecodeJSON(data, &e)
		if err != nil {
			var ie *InvalidEventError
			require.ErrorAs(t, err, &ie)
			require.Contains(t, []Reason{ReasonParse, ReasonKeyNotUTF8}, ie.Reason)
			require.Equal(t, AccessEvent{}, e)
			return
		}
		require.True(t, json.Valid(data), "decoded input that is not JSON")

		// Differential check of the string fields against encoding/json.
		// UseNumber: a valid number too large for float64 (1e995) in a
		// field we skip is still valid JSON, and must not fail the oracle.
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&m))
		for name, got := range map[string]string{"key": e.Key, "app": e.App, "op": e.Op, "client": e.Client, "node": e.Node} {
			want, _ := m[name].(string) // absent and null are ""
			require.Equal(t, want, got, "field %q", name)
		}
		require.True(t, utf8.ValidString(e.Key))

		var back AccessEvent
		require.NoError(t, DecodeJSON(AppendJSON(nil, &e), &back))
		require.Equal(t, e, back)
		require.NoError(t, DecodeBinary(AppendBinary(nil, &e), &back))
		require.Equal(t, e, back)
	})
}

// FuzzDecodeBinary: DecodeBinary never panics or over-allocates, and what
// it decodes re-encodes to an equal event (and to identical bytes, since
// the layout has one encoding per event apart from overlong varints).
func FuzzDecodeBinary(f *testing.F) {
	f.Add(AppendBinary(nil, &fullEvent))
	f.Fuzz(func(t *testing.T, data []byte) {
		var anyE, shared AccessEvent
		anyErr, sharedErr := DecodeAny(data, &anyE), DecodeAnyShared(data, &shared)
		require.Equal(t, anyE, shared, "DecodeAnyShared decodes what DecodeAny does")
		require.Equal(t, anyErr == nil, sharedErr == nil)
		if anyErr != nil {
			require.Equal(t, anyErr.Error(), sharedErr.Error())
		}
		var e AccessEvent
		if err := DecodeBinary(data, &e); err != nil {
			require.Equal(t, ReasonParse, ReasonOf(err))
			require.Equal(t, AccessEvent{}, e)
			return
		}
		enc := AppendBinary(nil, &e)
		require.LessOrEqual(t, len(enc), len(data), "canonical encoding is never longer")
		var back AccessEvent
		require.NoError(t, DecodeBinary(enc, &back))
		require.Equal(t, e, back)
		require.NoError(t, DecodeAny(enc, &back))
		require.Equal(t, e, back)
	})
}

// FuzzDecodeDeadLetter: DecodeDeadLetter never panics, accepts only JSON,
// and what it decodes round-trips exactly.
func FuzzDecodeDeadLetter(f *testing.F) {
	d := NewDeadLetter(1767225600456, "keyheat.raw:3@1187", errors.New("boom"), []byte("GET /x"), 0)
	f.Add(AppendDeadLetter(nil, &d))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d DeadLetter
		if err := DecodeDeadLetter(data, &d); err != nil {
			require.ErrorIs(t, err, ErrMalformedDeadLetter)
			require.Equal(t, DeadLetter{}, d)
			return
		}
		require.True(t, json.Valid(data), "decoded input that is not JSON")
		var back DeadLetter
		require.NoError(t, DecodeDeadLetter(AppendDeadLetter(nil, &d), &back))
		require.Equal(t, d, back)
	})
}
