package ingest

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// TestProgressOnlyWhenChanged: the progress log says the dead letters by
// reason, and says nothing on a tick where no count moved, so an idle
// source does not fill the log.
func TestProgressOnlyWhenChanged(t *testing.T) {
	s := NewStats(nil)
	log := &testenv.SyncBuffer{}
	at := time.Now()
	p := newProgressLine(s, nil, slog.New(slog.NewTextHandler(log, nil)), at)
	beat := func() {
		at = at.Add(10 * time.Second)
		p.report(at)
	}
	beat() // nothing read yet
	s.Lines.Add(4)
	s.Delivered.Add(4)
	s.Events.Add(1)
	s.DLQ.Add(3)
	s.dlq[reasonIndex(schemas.ReasonTimeSkew)].Add(2)
	s.dlq[reasonIndex(schemas.ReasonParse)].Add(1)
	beat()
	beat() // idle
	beat() // idle
	s.Lines.Add(1)
	beat()
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	require.Len(t, lines, 2, "a line for each tick that saw a change, none for the others:\n%s", log)
	require.Contains(t, lines[0], `msg=progress events_per_s=0 lines=4 delivered=4 events=1 dlq=3 dlq_share=75.0% dlq_reasons.parse=1 dlq_reasons.time_skew=2 skipped=0 failed=0`)
	require.Contains(t, lines[1], ` lines=5 `)
}
