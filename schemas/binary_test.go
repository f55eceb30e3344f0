package schemas

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBinaryCarriesNonUTF8Keys(t *testing.T) {
	want := AccessEvent{TimeMs: 5, Key: "\xff\xfe\x00bin", Client: "\x80"}
	var got AccessEvent
	require.NoError(t, DecodeBinary(AppendBinary(nil, &want), &got))
	require.Equal(t, want, got)
}

func TestBinaryLayout(t *testing.T) {
	e := AccessEvent{TimeMs: -1, Key: "k", Op: "GET", Status: 200, LatencyUs: 1}
	want := []byte{BinaryMagic, BinaryVersion,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // ts -1
		0x00,       // bytes
		0x90, 0x03, // status 200 zig-zag = 400
		0x02,          // lat_us 1
		1, 0, 3, 0, 0, // lengths
		'k', 'G', 'E', 'T'}
	require.Equal(t, want, AppendBinary(nil, &e))
}

func TestDecodeBinaryRejects(t *testing.T) {
	valid := AppendBinary(nil, &fullEvent)
	header := func(lens ...uint64) []byte {
		b := []byte{BinaryMagic, BinaryVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		for _, n := range lens {
			b = binary.AppendUvarint(b, n)
		}
		return b
	}
	tests := []struct {
		name   string
		src    []byte
		detail string
	}{
		{"empty", nil, "missing magic"},
		{"json", []byte(`{"key":"k"}`), "missing magic"},
		{"magic only", []byte{BinaryMagic}, "truncated in its header"},
		{"short header", []byte{BinaryMagic, BinaryVersion, 1, 2, 3}, "truncated in its header"},
		{"future version", []byte{BinaryMagic, 2, 0}, "unsupported binary event version 2"},
		{"no fields", []byte{BinaryMagic, BinaryVersion}, "truncated"},
		{"truncated varint", append(header(), 0x80), "truncated"},
		{"overlong varint", append(header(), bytes.Repeat([]byte{0xff}, 11)...), "truncated or a varint is overlong"},
		{"varint over 64 bits", append(header(), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0), "overlong"},
		{"truncated strings", valid[:len(valid)-1], "exceed"},
		{"every prefix of valid is rejected: lengths", valid[:10], ""},
		{"trailing byte", append(append([]byte{}, valid...), 'x'), "1 unexpected bytes"},
		{"huge length", header(1<<62, 0, 0, 0, 0), "exceed"},
		{"lengths sum overflows", header(1<<63, 1<<63, 0, 0, 0), "exceed"},
		{"status over int32", []byte{BinaryMagic, BinaryVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0, 0, 0}, "status out of int32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fullEvent
			err := DecodeBinary(tt.src, &e)
			requireReason(t, err, ReasonParse, &e)
			require.ErrorContains(t, err, tt.detail)
		})
	}
}

func TestDecodeBinaryEveryTruncationFails(t *testing.T) {
	valid := AppendBinary(nil, &fullEvent)
	for n := range len(valid) {
		var e AccessEvent
		require.Error(t, DecodeBinary(valid[:n], &e), "prefix of %d bytes", n)
	}
}
