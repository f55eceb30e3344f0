package ingest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

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
