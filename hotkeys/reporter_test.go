package hotkeys

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// verifyNoLeaks fails t if goroutines started during it are still running
// once its cleanups (brokers, reporters) are done. Called first, so that
// its cleanup runs last.
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// newTestReporter starts a reporter on cfg producing to topic through
// seeds, closed when the test ends if the test did not close it.
func newTestReporter(t *testing.T, seeds []string, topic string, cfg ReporterConfig) *Reporter {
	t.Helper()
	cfg.ClientOpts = append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, cfg.ClientOpts...)
	cfg.Topic = topic
	r, err := NewReporter(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = r.Close(ctx)
	})
	return r
}

// closeReporter closes r with a hang guard, requiring success.
func closeReporter(t *testing.T, r *Reporter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	require.NoError(t, r.Close(ctx))
}

// detectLimits are the checks detect applies to the events it reads with
// events.codec: binary and events.allow_binary_keys: true; the rest of
// its events settings are the defaults (keyheat's config.Defaults).
func detectLimits() schemas.Limits {
	l := schemas.DefaultLimits()
	l.AllowBinaryKeys = true
	return l
}

// decodeAsDetect decodes rec as detect's partition worker does
// (schemas.DecodeAny, then the limits a live run applies and those an
// --exit-at-end run applies), and requires the record to be keyed as
// detect judges it: its key equal to the event's access key.
func decodeAsDetect(t *testing.T, rec *kgo.Record) schemas.AccessEvent {
	t.Helper()
	require.Equal(t, schemas.Binary, schemas.Detect(rec.Value), "the binary codec wrote the record")
	var e schemas.AccessEvent
	require.NoError(t, schemas.DecodeAny(rec.Value, &e))
	nowMs := time.Now().UnixMilli()
	require.NoError(t, detectLimits().Validate(&e, nowMs), "a live detect refuses the event")
	require.NoError(t, detectLimits().ValidateProduced(&e, rec.Timestamp.UnixMilli(), nowMs), "detect --exit-at-end refuses the event")
	require.Equal(t, e.Key, string(rec.Key), "record key is the access key")
	return e
}

func TestReporterConfigValidate(t *testing.T) {
	ok := ReporterConfig{Topic: "keyheat.events"}
	require.NoError(t, ok.Validate())
	for _, tc := range []struct {
		name string
		edit func(*ReporterConfig)
		want string
	}{
		{"no topic", func(c *ReporterConfig) { c.Topic = "" }, "topic must be set"},
		{"negative flush interval", func(c *ReporterConfig) { c.FlushInterval = -time.Second }, "flush interval -1s is negative"},
		{"negative buffer bytes", func(c *ReporterConfig) { c.BufferBytes = -1 }, "buffer bytes -1 is negative"},
		{"negative stripes", func(c *ReporterConfig) { c.Stripes = -1 }, "stripes -1 is outside"},
		{"too many stripes", func(c *ReporterConfig) { c.Stripes = 1 << 20 }, "stripes 1048576 is outside"},
		{"negative max key bytes", func(c *ReporterConfig) { c.MaxKeyBytes = -5 }, "max key bytes -5 is negative"},
		{"buffers too small for the longest key", func(c *ReporterConfig) { c.BufferBytes, c.Stripes = 8<<10, 2 },
			"give buffers of 1024 bytes, less than"},
		{"buffers too large", func(c *ReporterConfig) { c.BufferBytes, c.Stripes = 8<<30, 1 },
			"give buffers of 2147483648 bytes, over 1073741824"},
		{"buffers too small for a long client", func(c *ReporterConfig) {
			c.BufferBytes, c.Stripes, c.MaxKeyBytes, c.Client = 4<<10, 1, 64, strings.Repeat("c", 1000)
		}, "less than the 1474 an event with a 64-byte key needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			require.ErrorContains(t, err, tc.want)
			_, err = NewReporter(c)
			require.ErrorContains(t, err, tc.want, "NewReporter validates")
		})
	}
	t.Run("every problem at once", func(t *testing.T) {
		err := ReporterConfig{FlushInterval: -1, Stripes: -1}.Validate()
		require.ErrorContains(t, err, "topic must be set")
		require.ErrorContains(t, err, "flush interval")
		require.ErrorContains(t, err, "stripes")
	})
	t.Run("default stripes fit the buffer", func(t *testing.T) {
		// A small BufferBytes lowers the default stripes instead of failing.
		c := ReporterConfig{Topic: "t", BufferBytes: 12 << 10}
		require.NoError(t, c.Validate())
		require.GreaterOrEqual(t, c.withDefaults().bufferSize(), c.withDefaults().largestEvent())
	})
}

// reportedKey is key i of a test: printable ones and, every seventh, one
// that is not UTF-8 and holds a zero byte, which only the binary codec
// carries.
func reportedKey(i int) string {
	if i%7 == 3 {
		return "bin\xff\x00" + strconv.Itoa(i)
	}
	return "item:" + strconv.Itoa(i)
}

// reporterBrokers runs fn against an embedded kfake cluster and against
// the real broker (KEYHEAT_TEST_KAFKA), as subtests named kfake and
// real_kafka.
func reporterBrokers(t *testing.T, fn func(t *testing.T, seeds []string)) {
	t.Run("kfake", func(t *testing.T) { fn(t, testenv.KFake(t)) })
	t.Run("real_kafka", func(t *testing.T) { fn(t, testenv.KafkaSeeds(t)) })
}

// TestReporterDeliversEveryEvent has goroutines record events over a set
// of keys into buffers large enough that none can be dropped, and
// requires the topic to hold exactly those events: each once, each
// record keyed by its access key and every key on one partition,
// decodable and accepted as detect reads them, with the time of its
// Record call.
func TestReporterDeliversEveryEvent(t *testing.T) {
	reporterBrokers(t, func(t *testing.T, seeds []string) {
		verifyNoLeaks(t)
		const goroutines, perGoroutine, keys = 8, 2500, 97
		topic := testenv.NewTopic(t, seeds, 4)
		reg := prometheus.NewPedanticRegistry()
		r := newTestReporter(t, seeds, topic, ReporterConfig{
			Client: "host-1", Node: "cache-7", FlushInterval: 20 * time.Millisecond,
			// 20,000 events of under 70 bytes: the buffers hold them all
			// even if Kafka took none before the end.
			BufferBytes: 8 << 20, Registerer: reg,
		})

		startMs := time.Now().UnixMilli()
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range perGoroutine {
					seq := g*perGoroutine + i
					// Bytes carries the event's sequence number, so that
					// each event on the topic is known.
					r.Record("shop", reportedKey(seq%keys), "GET", int64(seq))
				}
			})
		}
		wg.Wait()
		endMs := time.Now().UnixMilli()
		closeReporter(t, r)

		const total = goroutines * perGoroutine
		require.Equal(t, ReporterStats{Recorded: total, Sent: total}, r.Stats())

		recs := testenv.ReadCommitted(t, seeds, topic)
		require.Len(t, recs, total)
		seen := make([]bool, total)
		perKey := map[string]int{}
		partOf := map[string]int32{}
		for _, rec := range recs {
			e := decodeAsDetect(t, rec)
			seq := int(e.Bytes)
			require.True(t, seq >= 0 && seq < total, "sequence %d", seq)
			require.False(t, seen[seq], "event %d twice", seq)
			seen[seq] = true
			require.Equal(t, schemas.AccessEvent{TimeMs: e.TimeMs, Key: reportedKey(seq % keys), App: "shop", Op: "GET",
				Bytes: int64(seq), Client: "host-1", Node: "cache-7"}, e)
			// A millisecond either way: Record's clock may differ from
			// time.Now's by a slew of the wall clock since it synced.
			require.True(t, e.TimeMs >= startMs-1 && e.TimeMs <= endMs+1,
				"event time %d outside the Record calls' [%d, %d]", e.TimeMs, startMs, endMs)
			perKey[e.Key]++
			if p, ok := partOf[e.Key]; ok {
				require.Equal(t, p, rec.Partition, "key %q on two partitions", e.Key)
			}
			partOf[e.Key] = rec.Partition
		}
		require.Len(t, perKey, keys)
		for k := range keys {
			want := total / keys
			if k < total%keys {
				want++
			}
			require.Equal(t, want, perKey[reportedKey(k)], "events of key %d", k)
		}

		// The metrics say what Stats says.
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP keyheat_hotkeys_reporter_recorded_total Record calls: every access the application reported.
# TYPE keyheat_hotkeys_reporter_recorded_total counter
keyheat_hotkeys_reporter_recorded_total %[1]d
# HELP keyheat_hotkeys_reporter_sent_total Events Kafka acknowledged.
# TYPE keyheat_hotkeys_reporter_sent_total counter
keyheat_hotkeys_reporter_sent_total %[1]d
# HELP keyheat_hotkeys_reporter_pending_events Events buffered or in flight, not yet answered by Kafka.
# TYPE keyheat_hotkeys_reporter_pending_events gauge
keyheat_hotkeys_reporter_pending_events 0
`, total)), "keyheat_hotkeys_reporter_recorded_total", "keyheat_hotkeys_reporter_sent_total", "keyheat_hotkeys_reporter_pending_events"))
	})
}

// TestReporterDropsWhenFull fills a reporter's small buffers while its
// broker is down, so that Kafka can take nothing and Record must drop,
// then starts the broker: every event is either sent or counted as
// dropped, and the topic holds exactly the sent ones.
func TestReporterDropsWhenFull(t *testing.T) {
	verifyNoLeaks(t)
	b := testenv.RestartableKFake(t)
	topic := testenv.NewTopic(t, b.Seeds(), 2)
	r := newTestReporter(t, b.Seeds(), topic, ReporterConfig{
		Stripes: 1, MaxKeyBytes: 64, BufferBytes: 4 * 512, FlushInterval: 10 * time.Millisecond,
		// Look for the broker again soon once it is back (franz-go waits
		// five seconds between metadata loads by default).
		ClientOpts: []kgo.Opt{kgo.MetadataMinAge(20 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })},
	})
	b.Stop(t)

	const goroutines, perGoroutine = 4, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				r.Record("shop", reportedKey(i%13), "SET", int64(g))
			}
		})
	}
	wg.Wait()
	held := r.Stats()
	// Four buffers of 512 bytes hold a few dozen events of some 40 bytes.
	require.Less(t, held.Sent+held.Failed+held.Pending, int64(4*512/20), "more events held than the buffers have room for")
	require.Equal(t, int64(goroutines*perGoroutine), held.Recorded)
	require.Equal(t, held.Recorded, held.DroppedFull+held.Pending+held.Sent+held.Failed)
	require.Positive(t, held.DroppedFull)

	b.Start(t)
	closeReporter(t, r)
	st := r.Stats()
	require.Equal(t, held.DroppedFull, st.DroppedFull, "nothing dropped after the broker came back")
	require.Equal(t, ReporterStats{Recorded: goroutines * perGoroutine, Sent: st.Sent, DroppedFull: st.DroppedFull}, st)
	require.Equal(t, st.Recorded, st.Sent+st.DroppedFull)

	recs := testenv.ReadCommitted(t, b.Seeds(), topic)
	require.Len(t, recs, int(st.Sent))
	for _, rec := range recs {
		decodeAsDetect(t, rec)
	}
}

// TestReporterOverloaded records as fast as it can into small buffers of
// a live broker: whatever share Kafka keeps up with, the counts add up
// and the topic holds exactly the events counted as sent.
func TestReporterOverloaded(t *testing.T) {
	verifyNoLeaks(t)
	seeds := testenv.KFake(t)
	topic := testenv.NewTopic(t, seeds, 3)
	r := newTestReporter(t, seeds, topic, ReporterConfig{Stripes: 2, MaxKeyBytes: 32, BufferBytes: 8 * 1024})
	const goroutines, perGoroutine = 4, 20_000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				r.Record("shop", reportedKey(i%101), "GET", 1)
			}
		})
	}
	wg.Wait()
	closeReporter(t, r)
	st := r.Stats()
	require.Equal(t, int64(goroutines*perGoroutine), st.Recorded)
	require.Equal(t, st.Recorded, st.Sent+st.DroppedFull, "%+v", st)
	require.Zero(t, st.Pending+st.Failed+st.DroppedInvalid+st.DroppedClosed)
	t.Logf("sent %d, dropped %d", st.Sent, st.DroppedFull)
	require.Len(t, testenv.ReadCommitted(t, seeds, topic), int(st.Sent))
}

// TestReporterCloseFlushes records fewer events than fill a buffer with a
// flush interval that never comes: Close alone sends them.
func TestReporterCloseFlushes(t *testing.T) {
	verifyNoLeaks(t)
	seeds := testenv.KFake(t)
	topic := testenv.NewTopic(t, seeds, 2)
	r := newTestReporter(t, seeds, topic, ReporterConfig{FlushInterval: time.Hour})
	for i := range 10 {
		r.Record("shop", reportedKey(i), "GET", int64(i))
	}
	require.Equal(t, ReporterStats{Recorded: 10, Pending: 10}, r.Stats(), "nothing is sent before the interval")
	closeReporter(t, r)
	require.Equal(t, ReporterStats{Recorded: 10, Sent: 10}, r.Stats())
	require.Len(t, testenv.ReadCommitted(t, seeds, topic), 10)

	// After Close, Record counts and drops; Close again says the same.
	r.Record("shop", "late", "GET", 0)
	require.Equal(t, ReporterStats{Recorded: 11, Sent: 10, DroppedClosed: 1}, r.Stats())
	require.NoError(t, r.Close(context.Background()))
}

// TestReporterCloseGivesUp closes a reporter whose broker is down: Close
// returns when its context ends, says how many events did not reach
// Kafka, and counts them as failed.
func TestReporterCloseGivesUp(t *testing.T) {
	verifyNoLeaks(t)
	b := testenv.RestartableKFake(t)
	topic := testenv.NewTopic(t, b.Seeds(), 1)
	r := newTestReporter(t, b.Seeds(), topic, ReporterConfig{})
	b.Stop(t)
	for i := range 25 {
		r.Record("shop", reportedKey(i), "GET", 0)
	}
	// The context's end is the point of the test, not a bound on a wait.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := r.Close(ctx)
	require.ErrorContains(t, err, "25 of 25 events buffered were not acknowledged by kafka")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, ReporterStats{Recorded: 25, Failed: 25}, r.Stats())
	require.Equal(t, err, r.Close(context.Background()), "Close is idempotent")
	b.Start(t) // for the topic's deletion
}

// TestReporterCloseSendsNoClientMetrics: the reporter's client never asks
// the brokers for a client-metrics subscription (KIP-714). With one, kgo's
// Close waits up to a second for the final metrics push whatever Close's
// ctx says, and with the broker down Reporter.Close returned a second
// after its ctx ended (a 3 s ctx, 4.0 s; 3.0 s without).
func TestReporterCloseSendsNoClientMetrics(t *testing.T) {
	verifyNoLeaks(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var asked atomic.Int64
	c.ControlKey(int16(kmsg.GetTelemetrySubscriptions), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asked.Add(1)
		return nil, nil, false
	})
	seeds := c.ListenAddrs()
	topic := testenv.NewTopic(t, seeds, 1)
	r := newTestReporter(t, seeds, topic, ReporterConfig{FlushInterval: time.Millisecond})
	require.Equal(t, true, r.cl.OptValue(kgo.DisableClientMetrics), "client metrics are off")
	for i := range 10 {
		r.Record("shop", reportedKey(i), "GET", 0)
	}
	testenv.Eventually(t, "the events sent", func() bool { return r.Stats().Sent == 10 })
	closeReporter(t, r)
	require.Zero(t, asked.Load(), "the client asked for a client-metrics subscription")
}

// TestReporterDropsInvalid: events with an empty key or app or a key too
// long, or too large for a buffer, are dropped and counted by reason, and
// never produced.
func TestReporterDropsInvalid(t *testing.T) {
	verifyNoLeaks(t)
	seeds := testenv.KFake(t)
	topic := testenv.NewTopic(t, seeds, 1)
	reg := prometheus.NewPedanticRegistry()
	r := newTestReporter(t, seeds, topic, ReporterConfig{MaxKeyBytes: 16, Stripes: 1, BufferBytes: 4 * 512, Registerer: reg})
	r.Record("shop", "", "GET", 0)                      // empty key
	r.Record("", "k", "GET", 0)                         // empty app
	r.Record("shop", strings.Repeat("k", 17), "GET", 0) // key over MaxKeyBytes
	r.Record("shop", strings.Repeat("k", 16), "GET", 0) // the longest key: fine
	r.Record("shop", "k", strings.Repeat("o", 500), 0)  // op too long for a 512-byte buffer
	r.Record(strings.Repeat("a", 300), "k", "GET", 0)   // an app of 300 bytes still fits
	closeReporter(t, r)
	require.Equal(t, ReporterStats{Recorded: 6, Sent: 2, DroppedInvalid: 4}, r.Stats())
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP keyheat_hotkeys_reporter_dropped_total Events dropped before they were buffered, by reason: full (every buffer full), closed (after Close), empty_key, empty_app, key_too_long, too_large (app and op too long for a buffer).
# TYPE keyheat_hotkeys_reporter_dropped_total counter
keyheat_hotkeys_reporter_dropped_total{reason="closed"} 0
keyheat_hotkeys_reporter_dropped_total{reason="empty_app"} 1
keyheat_hotkeys_reporter_dropped_total{reason="empty_key"} 1
keyheat_hotkeys_reporter_dropped_total{reason="full"} 0
keyheat_hotkeys_reporter_dropped_total{reason="key_too_long"} 1
keyheat_hotkeys_reporter_dropped_total{reason="too_large"} 1
`), "keyheat_hotkeys_reporter_dropped_total"))
	recs := testenv.ReadCommitted(t, seeds, topic)
	require.Len(t, recs, 2)
	for _, rec := range recs {
		decodeAsDetect(t, rec)
	}
}

// TestReporterClock: Record's clock reads the wall clock, to the
// millisecond (one either way for a slew since it synced).
func TestReporterClock(t *testing.T) {
	r := newReporter(ReporterConfig{Topic: "t"}.withDefaults())
	for range 10_000 {
		before := time.Now().UnixMilli()
		got := r.nowMs()
		after := time.Now().UnixMilli()
		require.True(t, got >= before-1 && got <= after+1, "nowMs %d, time.Now %d then %d", got, before, after)
	}
}

// TestReporterLayout: stripes are two cache lines each, and the stripe
// count a power of two no larger than asked for, with buffers that hold
// the largest event.
func TestReporterLayout(t *testing.T) {
	require.Equal(t, uintptr(128), unsafe.Sizeof(reporterStripe{}))
	for _, stripes := range []int{1, 2, 3, 4, 5, 7, 8, 9, 64} {
		cfg := ReporterConfig{Topic: "t", Stripes: stripes, BufferBytes: 64 << 20}.withDefaults()
		require.NoError(t, cfg.Validate())
		r := newReporter(cfg)
		n := len(r.stripes)
		require.LessOrEqual(t, n, stripes)
		require.Greater(t, 2*n, stripes)
		require.Zero(t, n&(n-1), "%d stripes", n)
		require.Equal(t, uint32(n-1), r.mask)
		require.Equal(t, n*reporterBuffersPerStripe, cap(r.free))
		require.Equal(t, n*(reporterBuffersPerStripe-1), len(r.free))
		require.GreaterOrEqual(t, r.bufBytes, cfg.largestEvent())
		require.LessOrEqual(t, n*reporterBuffersPerStripe*r.bufBytes, cfg.BufferBytes)
	}
}

// TestReporterCloseWhileRecording closes a reporter while goroutines
// record, and they go on a while after: every call is counted once, the
// topic holds exactly the events sent, and the calls after Close are
// counted as such.
func TestReporterCloseWhileRecording(t *testing.T) {
	verifyNoLeaks(t)
	seeds := testenv.KFake(t)
	topic := testenv.NewTopic(t, seeds, 2)
	r := newTestReporter(t, seeds, topic, ReporterConfig{FlushInterval: 5 * time.Millisecond})
	const goroutines, afterClose = 4, 100
	var closed atomic.Bool
	var calls atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			n := 0
			for i := 0; ; i++ {
				if closed.Load() {
					if n++; n > afterClose {
						return
					}
				}
				r.Record("shop", reportedKey(i%31), "GET", 0)
				calls.Add(1)
			}
		})
	}
	// Close once the goroutines are under way.
	testenv.Eventually(t, "more than 1,000 events recorded", func() bool { return r.Stats().Recorded > 1000 })
	closeReporter(t, r)
	closed.Store(true)
	wg.Wait()
	st := r.Stats()
	require.Equal(t, calls.Load(), st.Recorded)
	require.GreaterOrEqual(t, st.DroppedClosed, int64(goroutines*afterClose))
	require.Equal(t, st.Recorded, st.Sent+st.DroppedFull+st.DroppedClosed, "%+v", st)
	require.Zero(t, st.Pending+st.Failed+st.DroppedInvalid)
	require.Len(t, testenv.ReadCommitted(t, seeds, topic), int(st.Sent))
}

// TestReporterProduceErrors: events Kafka refuses (their topic does not
// exist) are counted as failed, logged, and do not stop the reporter.
func TestReporterProduceErrors(t *testing.T) {
	verifyNoLeaks(t)
	seeds := testenv.KFake(t)
	var logs testenv.SyncBuffer
	r := newTestReporter(t, seeds, testenv.UniqueName(t, "missing"), ReporterConfig{
		FlushInterval: 5 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		// Give up on the missing topic at its first unknown answer, and
		// ask again soon.
		ClientOpts: []kgo.Opt{kgo.UnknownTopicRetries(0), kgo.MetadataMinAge(10 * time.Millisecond)},
	})
	for i := range 20 {
		r.Record("shop", reportedKey(i), "GET", 0)
	}
	testenv.Eventually(t, "the 20 events failed", func() bool { return r.Stats().Failed == 20 })
	r.Record("shop", "after", "GET", 0) // still taken
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	err := r.Close(ctx)
	require.ErrorContains(t, err, "21 of 21 events buffered were not acknowledged by kafka")
	require.Equal(t, ReporterStats{Recorded: 21, Failed: 21}, r.Stats())
	require.Contains(t, logs.String(), "hotkeys reporter: events not acknowledged by kafka")
	require.Contains(t, logs.String(), "UNKNOWN_TOPIC_OR_PARTITION")
}
