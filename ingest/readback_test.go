package ingest

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTailID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		ok   bool
		path string
		fg   fileGen
		off  int64
	}{
		{id: "/var/log/a.log@2049:131:0:1234", ok: true, path: "/var/log/a.log", fg: fileGen{fileID{2049, 131}, 0}, off: 1234},
		{id: "/x@y:z/a@1:2:3:0", ok: true, path: "/x@y:z/a", fg: fileGen{fileID{1, 2}, 3}, off: 0},
		{id: "app.raw/3/1234"},                // a topic source's id
		{id: "gen/7/12"},                      // the generator's
		{id: "stdin@12"},                      // too few fields
		{id: "@1:2:3:4"},                      // no path
		{id: "/a@1:2:3:"},                     // empty offset
		{id: "/a@1:2:3:01"},                   // not canonical
		{id: "/a@1:2:3:+1"},                   // signed
		{id: "/a@1:2:3:-1"},                   // negative
		{id: "/a@1:2:3:9223372036854775808"},  // past int64
		{id: "/a@1:2:18446744073709551616:0"}, // past uint64
		{id: "/a@1:2:x:4"},                    // not a number
		{id: "/a:1:2:3:4"},                    // no @
		{id: "/a@1:2:3:4 "},                   // trailing space
		{id: "/a@1:2:3:4:5"},                  // one number too many
	} {
		path, fg, off, ok := parseTailID(tc.id)
		require.Equal(t, tc.ok, ok, tc.id)
		if tc.ok {
			require.Equal(t, tc.path, path, tc.id)
			require.Equal(t, tc.fg, fg, tc.id)
			require.Equal(t, tc.off, off, tc.id)
		}
	}
}

// FuzzParseTailID: whatever parses formats back to the same id, the way
// follower.switchTo and Producer.event build it.
func FuzzParseTailID(f *testing.F) {
	for _, s := range []string{"/var/log/a.log@2049:131:0:1234", "/x@y:z/a@1:2:3:0", "a@0:0:0:0", "@1:2:3:4", "/a@1:2:3:01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		path, fg, off, ok := parseTailID(id)
		if !ok {
			return
		}
		back := path + "@" + strconv.FormatUint(fg.ID.Dev, 10) + ":" + strconv.FormatUint(fg.ID.Ino, 10) + ":" +
			strconv.FormatUint(fg.Gen, 10) + ":" + strconv.FormatInt(off, 10)
		if back != id {
			t.Fatalf("parseTailID(%q) formats back as %q", id, back)
		}
	})
}

// TestFloors checks the state file's form of floors round-trips and that
// a state naming other topics has none for these.
func TestFloors(t *testing.T) {
	topics := [numOutTopics]string{"ev", "dlq"}
	var f floors
	f.raise(topicEvents, 2, 10)
	f.raise(topicEvents, 0, 4)
	f.raise(topicEvents, 0, 3) // never lowered
	f.raise(topicDLQ, 0, 7)
	require.Equal(t, floors{{4, -1, 10}, {7}}, f)
	back, ok := floorsFromMap(f.toMap(topics), topics)
	require.True(t, ok)
	require.Equal(t, f, back)
	require.EqualValues(t, -1, back.at(topicDLQ, 5), "a partition not known is read from its start")
	_, ok = floorsFromMap(f.toMap(topics), [numOutTopics]string{"other", "dlq"})
	require.False(t, ok)
	require.Nil(t, f.toMap([numOutTopics]string{}), "no floors without a read-back")
}
