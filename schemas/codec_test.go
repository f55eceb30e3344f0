package schemas

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// roundTripEvents are events every codec must carry unchanged (all keys are
// valid UTF-8, so JSON can carry them too).
var roundTripEvents = map[string]AccessEvent{
	"typical":  fullEvent,
	"zero":     {},
	"key only": {Key: "k"},
	"all max": {TimeMs: math.MaxInt64, Key: strings.Repeat("x", 1024), App: "a", Op: "SET",
		Bytes: math.MaxInt64, Status: math.MaxInt32, Client: "c", Node: "n", LatencyUs: math.MaxInt64},
	"all min": {TimeMs: math.MinInt64, Key: "k", Bytes: math.MinInt64, Status: math.MinInt32,
		LatencyUs: math.MinInt64},
	"escapes": {TimeMs: 1, Key: "a\"b\\c/d\n\r\t\b\f\x00\x1f\x7f<>&", App: "\u2028\u2029",
		Op: "GET", Client: "日本語", Node: "emoji 😀 \uFFFD"},
	"http path": {TimeMs: 1767225600123, Key: "/api/v1/items?id=42&x=%20", App: "api", Op: "POST",
		Status: 503, LatencyUs: 120000},
}

func TestCodecsRoundTrip(t *testing.T) {
	for _, c := range []Codec{JSON, Binary} {
		for name, want := range roundTripEvents {
			t.Run(c.Name()+"/"+name, func(t *testing.T) {
				buf := c.Append([]byte("prefix"), &want)
				require.Equal(t, "prefix", string(buf[:6]), "Append must append, not overwrite")
				got := AccessEvent{Key: "stale", Node: "stale", Status: 7}
				require.NoError(t, c.Decode(buf[6:], &got))
				require.Equal(t, want, got)

				// DecodeAny must pick the right codec by itself.
				var viaAny AccessEvent
				require.NoError(t, DecodeAny(buf[6:], &viaAny))
				require.Equal(t, want, viaAny)
				require.Equal(t, c, Detect(buf[6:]))
			})
		}
	}
}

func TestDecodedStringsDoNotAliasInput(t *testing.T) {
	for _, c := range []Codec{JSON, Binary} {
		t.Run(c.Name(), func(t *testing.T) {
			src := c.Append(nil, &fullEvent)
			var e AccessEvent
			require.NoError(t, c.Decode(src, &e))
			for i := range src {
				src[i] = 'Z' // the consumer reuses its fetch buffer
			}
			require.Equal(t, fullEvent, e)
		})
	}
}

func TestDecodeAllocatesOnce(t *testing.T) {
	for _, c := range []Codec{JSON, Binary} {
		src := c.Append(nil, &fullEvent)
		var e AccessEvent
		allocs := testing.AllocsPerRun(100, func() {
			if err := c.Decode(src, &e); err != nil {
				t.Fatal(err)
			}
		})
		require.LessOrEqual(t, allocs, 1.0, c.Name())
	}
}

func TestEncodeDoesNotAllocate(t *testing.T) {
	for _, c := range []Codec{JSON, Binary} {
		buf := make([]byte, 0, 512)
		allocs := testing.AllocsPerRun(100, func() { buf = c.Append(buf[:0], &fullEvent) })
		require.Zero(t, allocs, c.Name())
	}
}

func TestCodecByName(t *testing.T) {
	tests := []struct {
		name    string
		want    Codec
		wantErr string
	}{
		{name: "json", want: JSON},
		{name: "JSON", want: JSON},
		{name: "binary", want: Binary},
		{name: "Binary", want: Binary},
		{name: "", wantErr: `unknown event codec ""`},
		{name: "avro", wantErr: `unknown event codec "avro": use "json" or "binary"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := CodecByName(tt.name)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, c)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, c)
			require.Equal(t, strings.ToLower(tt.name), c.Name())
		})
	}
}

func TestDetect(t *testing.T) {
	require.Equal(t, Codec(JSON), Detect(nil))
	require.Equal(t, Codec(JSON), Detect([]byte(" {}")))
	require.Equal(t, Codec(Binary), Detect([]byte{BinaryMagic}))
	// No valid JSON text can start with the magic byte.
	require.False(t, json.Valid([]byte{BinaryMagic, '{', '}'}))
}

// requireReason asserts err is an *InvalidEventError with want reason and
// a detail, and that e was reset.
func requireReason(t *testing.T, err error, want Reason, e *AccessEvent) {
	t.Helper()
	require.Error(t, err)
	var ie *InvalidEventError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, want, ie.Reason, "error: %v", err)
	require.NotEmpty(t, ie.Detail)
	require.Equal(t, AccessEvent{}, *e, "event must be reset on error")
}

// TestDecodeAnyShared: a binary event's strings point into the record
// (changing its bytes changes them), a JSON event's are copies, and
// either decodes as DecodeAny does.
func TestDecodeAnyShared(t *testing.T) {
	bin := AppendBinary(nil, &fullEvent)
	var e AccessEvent
	require.NoError(t, DecodeAnyShared(bin, &e))
	require.Equal(t, fullEvent, e)
	i := bytes.LastIndex(bin, []byte(fullEvent.Key))
	require.Positive(t, i)
	bin[i] ^= 0x20
	require.NotEqual(t, fullEvent.Key, e.Key, "the key points into the record")

	js := AppendJSON(nil, &fullEvent)
	require.NoError(t, DecodeAnyShared(js, &e))
	require.Equal(t, fullEvent, e)
	clear(js)
	require.Equal(t, fullEvent, e, "a JSON event's strings are copies")

	require.Error(t, DecodeAnyShared(bin[:5], &e))
	require.Equal(t, AccessEvent{}, e, "an error resets the event")
}
