package demo

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func produce(t *testing.T, seeds []string, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

// TestViewReadsRegistry: the demo's view follows a registry holding an
// episode (hot, update, cooled, tombstone) beside records of another
// writer (a manual entry under "m:…", one with a nil value, one it cannot
// decode): it prints the episode's three lines, the update with its rate
// and peak, and skips the rest.
func TestViewReadsRegistry(t *testing.T) {
	seeds := testenv.KFake(t)
	hot, reports := testenv.NewTopic(t, seeds, 1), testenv.NewTopic(t, seeds, 1)
	const onset = int64(1767225600000)
	ev := func(typ string, atMs int64, rate, peak float64) *kgo.Record {
		h := schemas.HotKeyEvent{Version: schemas.HotKeyVersion, ID: schemas.HotKeyID("t", 0, "r", typ, "web", "/checkout", atMs),
			Type: typ, App: "web", Key: "/checkout", Rule: "r", Rate: rate, PeakRate: peak, Threshold: 1000, WindowMs: 1000,
			Topic: "t", OnsetMs: onset}
		if typ == schemas.HotKeyCooled {
			h.OnsetMs = atMs
		}
		v, err := h.AppendJSON(nil)
		require.NoError(t, err)
		return &kgo.Record{Topic: hot, Key: schemas.HotKeyRecordKey(h.App, h.Key), Value: v}
	}
	key := schemas.HotKeyRecordKey("web", "/checkout")
	manual := append([]byte("m:"), key...)
	produce(t, seeds,
		&kgo.Record{Topic: hot, Key: manual, Value: []byte(`{"v":1,"action":"promote","app":"web","key":"/checkout","ttl_ms":60000}`)},
		ev(schemas.HotKeyHot, onset, 1000, 1000),
		&kgo.Record{Topic: hot, Key: manual}, // the manual entry removed
		ev(schemas.HotKeyUpdate, onset+1000, 1502, 1502),
		&kgo.Record{Topic: hot, Key: []byte("x"), Value: []byte("not json")},
		ev(schemas.HotKeyCooled, onset+31_000, 0, 1502),
		&kgo.Record{Topic: hot, Key: key}, // the tombstone
	)
	out := &testenv.SyncBuffer{}
	v, err := NewView(ViewConfig{ClientOpts: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Hotkeys: hot, Reports: reports,
		Out: out, Every: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	testenv.Eventually(t, "the cooled line", func() bool { return regexpMatch(`COOLED`, out.String()) })
	cancel()
	require.NoError(t, <-done)
	var lines []string
	for _, l := range splitLines(out.String()) {
		if regexpMatch(`^\d\d:\d\d:\d\d\.\d{3} `, l) {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 3, "hot, update, cooled; nothing for the others: %q", lines)
	require.Regexp(t, `^00:00:00\.000 HOT    web "/checkout" rate=1000\.0/s threshold`, lines[0])
	require.Regexp(t, `^00:00:01\.000 UPDATE web "/checkout" rate=1502\.0/s peak=1502\.0/s .* onset=00:00:00\.000`, lines[1])
	require.Regexp(t, `^00:00:31\.000 COOLED web "/checkout" rate=0\.0/s peak=1502\.0/s`, lines[2])
}

func regexpMatch(expr, s string) bool { return regexp.MustCompile(`(?m)` + expr).MatchString(s) }

func splitLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }
