package ingest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/logparse"
	"github.com/keyheat/keyheat/schemas"
)

// TestStdinDLQ feeds good and bad lines and checks each bad one lands in
// the DLQ with its reason, the source and the raw line, while the good
// ones reach the events topic keyed by access key.
func TestStdinDLQ(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
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
		var lens []int
		for _, r := range readAll(t, k.seeds, k.dlq) {
			var d schemas.DeadLetter
			require.NoError(t, schemas.DecodeDeadLetter(r.Value, &d))
			require.Equal(t, schemas.SourceStdin, d.Source)
			id, err := schemas.ParseRecordID(header(r, schemas.HeaderRecordID))
			require.NoError(t, err)
			require.Equal(t, schemas.IDStdin, id.Kind)
			require.True(t, strings.HasPrefix(input[id.Offset:], string(d.Raw)), "the id's offset %d is where the line starts", id.Offset)
			got[d.Reason] = append(got[d.Reason], string(d.Raw))
			if d.Reason == schemas.ReasonLineTooLong {
				lens = append(lens, d.OrigLen)
			}
		}
		require.ElementsMatch(t, []int{300, 100 << 10}, lens, "orig_len is the whole line's length")
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

// outageBrokers runs fn against a kfake cluster and a real broker of the
// test's own, each of which fn may stop and start again.
func outageBrokers(t *testing.T, fn func(t *testing.T, b *testenv.Broker)) {
	t.Run("kfake", func(t *testing.T) { fn(t, testenv.RestartableKFake(t)) })
	t.Run("real_kafka", func(t *testing.T) { fn(t, testenv.PrivateKafka(t)) })
}

// stdinRun is ReadLines on a pipe the test writes numbered JSON lines to.
type stdinRun struct {
	pl     *LineSender
	w      *io.PipeWriter
	next   int
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func startStdin(t *testing.T, k *kafkaEnv, cfg StdinConfig) *stdinRun {
	t.Helper()
	parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes"}, "test")
	require.NoError(t, err)
	pl := lineSender(t, k.producer(t, schemas.Binary), parser, LineOptions{})
	r, w := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	s := &stdinRun{pl: pl, w: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = ReadLines(ctx, r, pl, cfg)
		_ = r.Close()
	}()
	t.Cleanup(func() { cancel(); _ = w.Close(); <-s.done })
	return s
}

func (s *stdinRun) write(t *testing.T, upTo int) {
	t.Helper()
	var b strings.Builder
	for ; s.next < upTo; s.next++ {
		b.WriteString(line(s.next))
	}
	_, err := io.WriteString(s.w, b.String())
	require.NoError(t, err)
}

// requireLinesOnce checks that the events topic holds each line of want
// exactly once and no other.
func requireLinesOnce(t *testing.T, k *kafkaEnv, want map[int]bool) {
	t.Helper()
	got := map[int]int{}
	for _, r := range readAll(t, k.seeds, k.events) {
		got[seqOf(t, r)]++
	}
	for i := range want {
		require.Equal(t, 1, got[i], "line %d on the topic %d times", i, got[i])
	}
	for i, c := range got {
		require.True(t, want[i], "line %d on the topic %d times, expected none", i, c)
	}
}

// TestStdinBrokerDownMidStream: the broker goes away mid-stream and the
// input ends while it is away. stdin keeps what Kafka has not taken and
// waits for it without a deadline; when the broker is back every line is
// delivered once and ReadLines returns nil.
func TestStdinBrokerDownMidStream(t *testing.T) {
	outageBrokers(t, func(t *testing.T, b *testenv.Broker) {
		k := newKafkaEnv(t, b.Seeds(), 2)
		s := startStdin(t, k, StdinConfig{})
		s.write(t, 2000)
		testenv.Eventually(t, "2000 lines delivered", func() bool { return s.pl.stats.Delivered.Load() == 2000 })
		b.Stop(t)
		s.write(t, 4000)
		require.NoError(t, s.w.Close())
		testenv.Eventually(t, "4000 lines read", func() bool { return s.pl.stats.Lines.Load() == 4000 })
		select {
		case <-s.done:
			t.Fatalf("ReadLines returned while Kafka was away: %v", s.err)
		case <-time.After(500 * time.Millisecond):
		}
		b.Start(t)
		<-s.done
		require.NoError(t, s.err)
		st := s.pl.stats
		require.EqualValues(t, 4000, st.Delivered.Load())
		require.Zero(t, st.Undelivered.Load())
		want := map[int]bool{}
		for i := range 4000 {
			want[i] = true
		}
		requireLinesOnce(t, k, want)
	})
}

// TestStdinSpillOnStop: told to stop while Kafka is away, stdin waits
// StopTimeout, then writes what Kafka has not taken to the spill file, in
// order, and says how many and where; summed with what is on Kafka that is
// every line, once. Sending the spill file again delivers the rest.
func TestStdinSpillOnStop(t *testing.T) {
	outageBrokers(t, func(t *testing.T, b *testenv.Broker) {
		k := newKafkaEnv(t, b.Seeds(), 2)
		spill := filepath.Join(t.TempDir(), "stdin.spill")
		var logs testenv.SyncBuffer
		s := startStdin(t, k, StdinConfig{DeliveryOptions: DeliveryOptions{StopTimeout: 200 * time.Millisecond, SpillFile: spill},
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		s.write(t, 1000)
		testenv.Eventually(t, "1000 lines delivered", func() bool { return s.pl.stats.Delivered.Load() == 1000 })
		b.Stop(t)
		s.write(t, 3000)
		testenv.Eventually(t, "3000 lines read", func() bool { return s.pl.stats.Lines.Load() == 3000 })
		s.cancel() // SIGTERM
		<-s.done
		var ue *UndeliveredError
		require.ErrorAs(t, s.err, &ue)
		require.EqualValues(t, 2000, ue.Lines)
		require.Contains(t, ue.Error(), "2000 lines read were not delivered to Kafka; they are in "+spill)
		require.Contains(t, logs.String(), "wrote the 2000 lines kafka did not take to "+spill)
		st := s.pl.stats
		require.EqualValues(t, 1000, st.Delivered.Load())
		require.EqualValues(t, 2000, st.Undelivered.Load())
		require.EqualValues(t, 2000, st.Spilled.Load())

		var want strings.Builder
		for i := 1000; i < 3000; i++ {
			want.WriteString(line(i))
		}
		got, err := os.ReadFile(spill)
		require.NoError(t, err)
		require.Equal(t, want.String(), string(got), "the spill file holds the undelivered lines as read, in order")

		b.Start(t)
		f, err := os.Open(spill)
		require.NoError(t, err)
		defer f.Close()
		parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes"}, "test")
		require.NoError(t, err)
		require.NoError(t, ReadLines(context.Background(), f, lineSender(t, k.producer(t, schemas.Binary), parser, LineOptions{}), StdinConfig{}))
		all := map[int]bool{}
		for i := range 3000 {
			all[i] = true
		}
		requireLinesOnce(t, k, all)
	})
}

// TestStdinEndTimeout: with EndTimeout, the end of input waits that long
// for an unreachable Kafka, then spills.
func TestStdinEndTimeout(t *testing.T) {
	b := testenv.RestartableKFake(t)
	k := newKafkaEnv(t, b.Seeds(), 1)
	spill := filepath.Join(t.TempDir(), "stdin.spill")
	s := startStdin(t, k, StdinConfig{DeliveryOptions: DeliveryOptions{EndTimeout: 300 * time.Millisecond, SpillFile: spill}})
	s.write(t, 10)
	testenv.Eventually(t, "10 lines delivered", func() bool { return s.pl.stats.Delivered.Load() == 10 })
	b.Stop(t)
	s.write(t, 25)
	require.NoError(t, s.w.Close())
	<-s.done
	var ue *UndeliveredError
	require.ErrorAs(t, s.err, &ue)
	require.EqualValues(t, 15, ue.Lines)
	got, err := os.ReadFile(spill)
	require.NoError(t, err)
	require.Equal(t, 15, strings.Count(string(got), "\n"))
	b.Start(t) // for the cleanups
}

// TestStdinSpillNotWritable: a spill file that cannot be written is found
// at the start, before a line is read, not when Kafka is away at the end
// and the lines it should keep are lost.
func TestStdinSpillNotWritable(t *testing.T) {
	k := newKafkaEnv(t, testenv.KFake(t), 1)
	notDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	for _, tc := range []struct {
		name  string
		spill string
	}{
		{"missing folder", filepath.Join(t.TempDir(), "missing", "stdin.spill")},
		{"folder is a file", filepath.Join(notDir, "stdin.spill")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes"}, "test")
			require.NoError(t, err)
			pl := lineSender(t, k.producer(t, schemas.Binary), parser, LineOptions{})
			err = ReadLines(context.Background(), strings.NewReader(line(0)), pl, StdinConfig{DeliveryOptions: DeliveryOptions{SpillFile: tc.spill}})
			require.ErrorContains(t, err, "ingest.spill_file")
			require.ErrorContains(t, err, tc.spill)
			require.Zero(t, pl.stats.Lines.Load(), "nothing is read")
			_, serr := os.Stat(tc.spill)
			require.Error(t, serr, "no spill file is left behind")
		})
	}
	t.Run("the check leaves an existing spill file as it was", func(t *testing.T) {
		spill := filepath.Join(t.TempDir(), "stdin.spill")
		require.NoError(t, os.WriteFile(spill, []byte("kept\n"), 0o600))
		parser, err := logparse.NewJSON(logparse.JSONConfig{Key: "key", Bytes: "bytes"}, "test")
		require.NoError(t, err)
		pl := lineSender(t, k.producer(t, schemas.Binary), parser, LineOptions{})
		require.NoError(t, ReadLines(context.Background(), strings.NewReader(line(0)), pl, StdinConfig{DeliveryOptions: DeliveryOptions{SpillFile: spill}}))
		got, err := os.ReadFile(spill)
		require.NoError(t, err)
		require.Equal(t, "kept\n", string(got))
	})
}
