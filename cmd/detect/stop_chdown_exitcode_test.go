package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestStopWithClickHouseDownExitsNonZero: SIGTERM while ClickHouse is
// down leaves rows unwritten ("close clickhouse writer: N items not
// written … do not commit their offsets"). The process says so with its
// exit code, as ingest does when it gives up on lines, so a supervisor or
// a deploy script does not take the stop for a clean one, and says where
// the next run resumes.
func TestStopWithClickHouseDownExitsNonZero(t *testing.T) {
	seeds := testenv.KafkaSeeds(t)
	srv := testenv.PrivateClickHouse(t)
	e := newRunEnv(t, seeds, testenv.NewTopic(t, seeds, 2))
	db := testenv.UniqueName(t, "keyheat")
	args := append([]string{"run", sinkRules, "--pipeline.idle_timeout=1h", "--detect.flush_timeout=2s"},
		chFlags(srv.Addr(), db)...)
	p := start(t, nil, append(args, e.flags()...)...)
	ch := openCH(t, srv.Addr(), db)

	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	produceEvents(t, seeds, e.events, 5000, base, 1, 4, 100) // windows 0..4; 0..3 close
	testenv.Eventually(t, "the first windows in ClickHouse", func() bool {
		n, err := ch.counts("reports")
		return err == nil && n.final == 2*4
	})
	srv.Stop(t)
	produceEvents(t, seeds, e.events, 5000, base+5000, 1, 4, 100) // windows 4..8 close: rows for a server that is down
	p.WaitStderr(`msg="clickhouse insert failed; retrying"`)
	code := p.Stop()
	require.Contains(t, p.Stderr.String(), "items not written", "the stop left rows unwritten")
	require.NotEqual(t, 0, code, "a stop that left rows unwritten exits non-zero")
	require.Contains(t, p.Stderr.String(), "resumes before them", "the error says where the next run resumes")
}
