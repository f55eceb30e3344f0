package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestSummaryCountsDeadLetters: ingest's summary says how many lines went
// to the DLQ, by reason and as a share of the lines read, and still adds
// up (lines = delivered + undelivered); when most did, a warning names the
// setting for the dominant reason. Old logs without events.max_skew 0 are
// the case users met: every old line went to the DLQ and ingest said only
// dlq=N.
func TestSummaryCountsDeadLetters(t *testing.T) {
	testenv.EachBroker(t, func(t *testing.T, seeds []string) {
		tp := newTopics(t, seeds)
		nowMs := time.Now().UnixMilli()
		oldMs := time.Now().AddDate(0, -10, 0).UnixMilli()
		var in strings.Builder
		for i := range 100 {
			fmt.Fprintf(&in, `{"key":"k%d","time":%d}`+"\n", i, oldMs+int64(i))
		}
		for i := range 20 {
			fmt.Fprintf(&in, `{"key":"k%d","time":%d}`+"\n", i, nowMs+int64(i))
		}
		in.WriteString("not json\n")
		path := filepath.Join(t.TempDir(), "old.log")
		require.NoError(t, os.WriteFile(path, []byte(in.String()), 0o600))
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()

		p := startIngest(t, f, append([]string{"stdin", "--ingest.json.time=time"}, tp.flags()...)...)
		require.Equal(t, 0, p.WaitExit(), "every line is on Kafka, dead letters included")
		out := p.Stderr.String()
		require.Contains(t, out, `msg="stopped; every line read was delivered" lines=121 delivered=121 undelivered=0 events=20 `+
			`dlq=101 dlq_share=83.5% dlq_reasons.parse=1 dlq_reasons.time_skew=100 skipped=0 `)
		require.Contains(t, out, `level=WARN msg="most of what was read went to the DLQ" dlq_topic=`+tp.dlq+
			` read=121 dlq=101 dlq_share=83.5% reason=time_skew reason_dlq=100 fix="each had a time further than events.max_skew from now: events.max_skew: 0 turns the time check off`)
		require.Len(t, testenv.ReadCommitted(t, tp.seeds, tp.dlq), 101)
	})
}
