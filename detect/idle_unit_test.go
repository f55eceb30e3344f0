package detect

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/keyheat/keyheat/pipeline"
	"github.com/keyheat/keyheat/schemas"
)

// A live partition is not judged idle before it knows where it starts and
// how much it has to read, however long that takes: under a starved CPU
// the committed offsets can arrive after the idle timeout, and a partition
// taken for idle meanwhile would have its clock moved past its own first
// events, which would then be late (lost).
func TestPartitionNotIdleBeforeItsBacklogIsKnown(t *testing.T) {
	o := pipeline.DefaultOptions()
	o.IdleTimeout = time.Second
	s, err := New(Config{Options: DefaultOptions(), ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")},
		Topics: OutputTopics{Events: "e", DLQ: "d", Hotkeys: "h", Windows: "w", Reports: "r", Progress: "p"}, Limits: schemas.DefaultLimits(), Pipeline: o,
		Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(s.out.Close)
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	a := newAligner(1000, 4, nil)

	// Assigned, its committed offset not known yet.
	w := newPartWorker(s, tp{"e", 0}, 2, a)
	now = now.Add(time.Hour)
	w.lag.Store(0)
	w.checkIdle(now)
	require.False(t, w.alignIdle, "not idle before its start is known")
	// The idle timeout counts from the start.
	w.setStart(startInfo{committed: -1, end: -1, first: 0})
	require.True(t, w.loadStart())
	w.checkIdle(now.Add(time.Second - time.Nanosecond))
	require.False(t, w.alignIdle, "not idle before the idle timeout from its start")
	w.checkIdle(now.Add(time.Second))
	require.True(t, w.alignIdle, "idle once quiet for the idle timeout with nothing to read")

	// Started, its end offset not known yet (asking for it failed).
	w = newPartWorker(s, tp{"e", 1}, 2, a)
	w.setStart(startInfo{committed: -1, end: -1, first: 0})
	require.True(t, w.loadStart())
	now = now.Add(time.Hour)
	w.checkIdle(now)
	require.False(t, w.alignIdle, "not idle before its backlog is known")
	w.lag.Store(60)
	w.checkIdle(now)
	require.False(t, w.alignIdle, "not idle with records to read")
	w.lag.Store(0)
	w.checkIdle(now)
	require.True(t, w.alignIdle, "idle once read to its end")
}
