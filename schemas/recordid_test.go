package schemas

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRecordID(t *testing.T) {
	for _, tc := range []struct {
		text string
		want RecordID // zero Kind: malformed
	}{
		{"/var/log/a.log@2049:131:0:1234", RecordID{Kind: IDTail, Path: "/var/log/a.log", Dev: 2049, Ino: 131, Offset: 1234}},
		{"/x@y:z/a@1:2:3:0", RecordID{Kind: IDTail, Path: "/x@y:z/a", Dev: 1, Ino: 2, FileGen: 3}},
		{"/a@18446744073709551615:18446744073709551615:18446744073709551615:9223372036854775807",
			RecordID{Kind: IDTail, Path: "/a", Dev: math.MaxUint64, Ino: math.MaxUint64, FileGen: math.MaxUint64, Offset: math.MaxInt64}},
		{"stdin@1742220131000000000:77", RecordID{Kind: IDStdin, StartNs: 1742220131000000000, Offset: 77}},
		{"app.raw/3/1187", RecordID{Kind: IDTopic, Topic: "app.raw", Partition: 3, Offset: 1187}},
		{"A_b-9/2147483647/0", RecordID{Kind: IDTopic, Topic: "A_b-9", Partition: math.MaxInt32}},
		{"gen:1:42", RecordID{Kind: IDGen, Seed: 1, Offset: 42}},
		{"gen:18446744073709551615:0", RecordID{Kind: IDGen, Seed: math.MaxUint64}},
		{"/var/log/a.log@2049:131:0:1234#2", RecordID{Kind: IDTail, Path: "/var/log/a.log", Dev: 2049, Ino: 131, Offset: 1234, Index: 2}},
		{"/a#1@1:2:0:5", RecordID{Kind: IDTail, Path: "/a#1", Dev: 1, Ino: 2, Offset: 5}},
		{"/a#1@1:2:0:5#1", RecordID{Kind: IDTail, Path: "/a#1", Dev: 1, Ino: 2, Offset: 5, Index: 1}},
		{"stdin@1:2#2147483647", RecordID{Kind: IDStdin, StartNs: 1, Offset: 2, Index: math.MaxInt32}},
		{"app.raw/3/1187#3", RecordID{Kind: IDTopic, Topic: "app.raw", Partition: 3, Offset: 1187, Index: 3}},
		{"gen:1:42#1", RecordID{Kind: IDGen, Seed: 1, Offset: 42, Index: 1}},

		{"", RecordID{}},
		{"@1:2:3:4", RecordID{}},                      // no path
		{"a.log@1:2:3:4", RecordID{}},                 // relative path
		{"/a@1:2:3:", RecordID{}},                     // empty offset
		{"/a@1:2:3:01", RecordID{}},                   // not canonical
		{"/a@1:2:3:+1", RecordID{}},                   // signed
		{"/a@1:2:3:-1", RecordID{}},                   // negative
		{"/a@1:2:3:9223372036854775808", RecordID{}},  // offset past int64
		{"/a@1:2:18446744073709551616:0", RecordID{}}, // past uint64
		{"/a@1:2:x:4", RecordID{}},                    // not a number
		{"/a:1:2:3:4", RecordID{}},                    // no @
		{"/a@1:2:3:4 ", RecordID{}},                   // trailing space
		{"/a@1:2:3:4:5", RecordID{}},                  // one number too many
		{"stdin@12", RecordID{}},                      // no offset
		{"stdin@1:2:3", RecordID{}},                   // one number too many
		{"stdin@-1:2", RecordID{}},                    // negative start
		{"gen:1", RecordID{}},                         // no sequence
		{"gen:1:9223372036854775808", RecordID{}},     // sequence past int64
		{"app.raw/3", RecordID{}},                     // no offset
		{"app.raw/3/4/5", RecordID{}},                 // one part too many
		{"app raw/3/4", RecordID{}},                   // illegal topic
		{"/3/4", RecordID{}},                          // a tail id without @
		{"t/2147483648/0", RecordID{}},                // partition past int32
		{"t/03/0", RecordID{}},                        // not canonical
		{"gen:1:42#0", RecordID{}},                    // index 0 is written without a suffix
		{"gen:1:42#01", RecordID{}},                   // not canonical
		{"gen:1:42#", RecordID{}},                     // empty index
		{"gen:1:42#2147483648", RecordID{}},           // index past int32
		{"gen:1:42#1#1", RecordID{}},                  // two suffixes
	} {
		got, err := ParseRecordID(tc.text)
		if tc.want.Kind == 0 {
			require.ErrorIs(t, err, ErrMalformedRecordID, "%q", tc.text)
			require.ErrorContains(t, err, "malformed record id", "%q", tc.text)
			continue
		}
		require.NoError(t, err, tc.text)
		require.Equal(t, tc.want, got, tc.text)
		require.Equal(t, tc.text, got.String(), "%q formats back", tc.text)
	}
}

// TestParseGenSlashIsTopic: gen/7/12 is a well-formed topic id (a topic
// may be called gen), not a generator's.
func TestParseGenSlashIsTopic(t *testing.T) {
	id, err := ParseRecordID("gen/7/12")
	require.NoError(t, err)
	require.Equal(t, RecordID{Kind: IDTopic, Topic: "gen", Partition: 7, Offset: 12}, id)
}

func TestAppendRecordID(t *testing.T) {
	id := RecordID{Kind: IDTopic, Topic: "raw", Partition: 2}
	b := AppendRecordID([]byte("x"), id.Prefix(), 99, 0)
	require.Equal(t, "xraw/2/99", string(b))
	b = AppendRecordID(b[:0], id.Prefix(), 99, 2)
	require.Equal(t, "raw/2/99#2", string(b))
	allocs := testing.AllocsPerRun(100, func() { b = AppendRecordID(b[:0], "raw/2/", 123456, 1) })
	require.Zero(t, allocs, "appending an id into a buffer with room allocates nothing")
}

// TestRecordIDRoundTrip builds random ids of every kind within the grammar
// and parses each back to itself.
func TestRecordIDRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pathRunes := []rune("/ab@:#.-_ é0")
	topicRunes := []rune("abcXYZ019._-")
	str := func(alphabet []rune, n int) string {
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	for range 5000 {
		var id RecordID
		off := rng.Int64()
		switch IDKind(rng.IntN(4) + 1) {
		case IDTail:
			id = RecordID{Kind: IDTail, Path: "/" + str(pathRunes, rng.IntN(20)), Dev: rng.Uint64(), Ino: rng.Uint64(), FileGen: rng.Uint64N(5), Offset: off}
		case IDStdin:
			id = RecordID{Kind: IDStdin, StartNs: rng.Int64(), Offset: off}
		case IDTopic:
			id = RecordID{Kind: IDTopic, Topic: str(topicRunes, 1+rng.IntN(20)), Partition: rng.Int32(), Offset: off}
		case IDGen:
			id = RecordID{Kind: IDGen, Seed: rng.Uint64(), Offset: off}
		}
		if rng.IntN(4) == 0 {
			id.Index = 1 + rng.IntN(math.MaxInt32)
		}
		back, err := ParseRecordID(id.String())
		require.NoError(t, err, "%+v as %q", id, id.String())
		require.Equal(t, id, back)
	}
}

// FuzzParseRecordID: whatever parses formats back to the same text, and
// whatever fails says it is malformed.
func FuzzParseRecordID(f *testing.F) {
	for _, s := range []string{"/var/log/a.log@2049:131:0:1234", "/x@y:z/a@1:2:3:0", "stdin@1742220131000000000:77",
		"app.raw/3/1187", "gen:1:42", "@1:2:3:4", "/a@1:2:3:01", "gen/7/12", "t/2147483648/0", "gen:1:42#3", "/a#1@1:2:0:5#1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseRecordID(s)
		if err != nil {
			if !errors.Is(err, ErrMalformedRecordID) {
				t.Fatalf("ParseRecordID(%q): error %v does not wrap ErrMalformedRecordID", s, err)
			}
			return
		}
		if back := id.String(); back != s {
			t.Fatalf("ParseRecordID(%q) = %+v, which formats as %q", s, id, back)
		}
	})
}
