package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestStopWithClickHouseDownSaysWhatItWaitsFor: a SIGTERM while
// ClickHouse is down waits up to detect.flush_timeout for outputs, and
// says meanwhile what it waits for, with the deadline and the time left,
// instead of sitting silent; then it exits as before (non-zero, rows
// unwritten).
func TestStopWithClickHouseDownSaysWhatItWaitsFor(t *testing.T) {
	seeds := testenv.KafkaSeeds(t)
	srv := testenv.PrivateClickHouse(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 2))
	db := testenv.UniqueName(t, "keyheat")
	args := append([]string{"run", sinkRules, "--pipeline.idle_timeout=1h", "--detect.flush_timeout=6s"},
		chFlags(srv.Addr(), db)...)
	p := start(t, nil, append(args, e.flags()...)...)
	ch := openCH(t, srv.Addr(), db)

	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	produceEvents(t, seeds, e.events, 5000, base, 1, 4, 100)
	testenv.Eventually(t, "the first windows in ClickHouse", func() bool {
		n, err := ch.counts("reports")
		return err == nil && n.final == 2*4
	})
	srv.Stop(t)
	produceEvents(t, seeds, e.events, 5000, base+5000, 1, 4, 100) // rows for a server that is down
	p.WaitStderr(`msg="clickhouse insert failed; retrying"`)
	code := p.Stop()
	log := p.Stderr.String()
	// The ClickHouse rows are the merger's outputs; the partitions' own
	// (Kafka records) may all be acknowledged by the time of the stop, and
	// then the partitions have nothing to wait for.
	require.Regexp(t, `msg="(releasing partitions|merger giving up the windows topic): waiting for outputs in flight to be acknowledged[^"]*" outputs=[1-9][0-9]* (partitions=[1-9] )?deadline=\S+ left=\S+ clickhouse=`, log,
		"the drain of what holds ClickHouse rows says what it waits for")
	require.Regexp(t, `msg="stopping: waiting for ClickHouse to take the rows the writer still holds[^"]*" deadline=\S+ left=\S+`, log,
		"the ClickHouse writer's close says what it waits for")
	require.NotEqual(t, 0, code, "the exit is as before: rows unwritten")
}
