package ingest

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// TestStdinDLQ feeds good and bad lines and checks each bad one lands in
// the DLQ with its reason, the source and the raw line, while the good
// ones reach the events topic keyed by access key.
func TestStdinDLQ(t *testing.T) {
	brokers(t, func(t *testing.T, seeds []string) {
		k := newKafkaEnv(t, seeds, 2)
		// A SET of user:3 padded with its value to exactly 256 bytes.
		pre := `1742220131.8 [0 127.0.0.1:1] "set" "user:3" "`
		atMost256 := pre + strings.Repeat("v", 256-len(pre)-1) + `"`
		require.Len(t, atMost256, 256)
		parser, err := logparse.New(logparse.Config{Format: "redis"})
		require.NoError(t, err)
		pl, err := NewLineSender(LineSenderConfig{LineOptions: LineOptions{MaxLineBytes: 256}, Parser: parser,
			Producer: k.producer(t, schemas.JSON), Limits: schemas.Limits{MaxKeyBytes: 16}})
		require.NoError(t, err)
		input := strings.Join([]string{
			"OK",
			`1742220131.1 [0 127.0.0.1:1] "get" "user:1"`,
			`garbage`,
			`1742220131.2 [0 127.0.0.1:1] "get"`,
			`1742220131.3 [0 127.0.0.1:1] "get" "a-key-that-is-far-too-long"`,
			`1742220131.4 [0 127.0.0.1:1] "get" "bad\xff"`,
			`1742220131.5 [0 127.0.0.1:1] "ping"`,
			`1742220131.6 [0 127.0.0.1:1] "set" "user:2" "v"`,
			strings.Repeat("x", 300),
			`1742220131.7 [0 127.0.0.1:1] "get" "user:1"` + "\r",
			atMost256,                    // exactly the limit: an event
			strings.Repeat("y", 100<<10), // longer than the read buffer too
			`1742220131.9 [0 127.0.0.1:1] "get" "user:4"`,
		}, "\n")
		require.NoError(t, ReadLines(context.Background(), strings.NewReader(input), pl, StdinConfig{}))

		events := readAll(t, k.seeds, k.events)
		var keys []string
		for _, r := range events {
			keys = append(keys, string(r.Key))
		}
		require.ElementsMatch(t, []string{"user:1", "user:2", "user:1", "user:3", "user:4"}, keys)

		got := map[schemas.Reason][]string{}
		for _, r := range readAll(t, k.seeds, k.dlq) {
			var d schemas.DeadLetter
			require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
			require.Equal(t, schemas.SourceStdin, d.Source)
			id, err := schemas.ParseRecordID(header(r, schemas.HeaderRecordID))
			require.NoError(t, err)
			require.Equal(t, schemas.IDStdin, id.Kind)
			require.True(t, strings.HasPrefix(input[id.Offset:], string(d.Raw)), "the id's offset %d is where the line starts", id.Offset)
			got[d.Reason] = append(got[d.Reason], string(d.Raw))
		}
		require.Len(t, got[schemas.ReasonLineTooLong], 2)
		require.ElementsMatch(t, []string{strings.Repeat("x", 256), strings.Repeat("y", 256)}, got[schemas.ReasonLineTooLong])
		delete(got, schemas.ReasonLineTooLong)
		require.Equal(t, map[schemas.Reason][]string{
			schemas.ReasonParse:      {"garbage"},
			schemas.ReasonEmptyKey:   {`1742220131.2 [0 127.0.0.1:1] "get"`},
			schemas.ReasonKeyTooLong: {`1742220131.3 [0 127.0.0.1:1] "get" "a-key-that-is-far-too-long"`},
			schemas.ReasonKeyNotUTF8: {`1742220131.4 [0 127.0.0.1:1] "get" "bad\xff"`},
		}, got)
		s := pl.Stats()
		require.EqualValues(t, 5, s.Events.Load())
		require.EqualValues(t, 6, s.DLQ.Load())
		require.EqualValues(t, 2, s.Skipped.Load())
		require.EqualValues(t, 1, s.DLQByReason(schemas.ReasonKeyNotUTF8))
	})
}
