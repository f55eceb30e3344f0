package controlplane_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/schemas"
)

// TestReportsRangeSubMillisecond: from and to are RFC 3339 with any
// fraction, and the range is [from, to): both are rounded up to the next
// millisecond, so a window starting before a sub-millisecond "to" is in
// and one starting before "from" is out; a range shorter than a
// millisecond that holds no millisecond is an empty answer, not a bad
// request.
func TestReportsRangeSubMillisecond(t *testing.T) {
	h := newHistory(t, controlplane.HistoryConfig{})
	a := historyServer(t, h, nil, nil)
	for w := range 3 {
		h.AddReport(windowReport(schemas.ScopeCluster, "", w))
	}
	at := func(ms int64, extra time.Duration) string {
		return time.UnixMilli(ms).Add(extra).UTC().Format(time.RFC3339Nano)
	}
	q := url.Values{"from": {at(baseMs, 500*time.Microsecond)}, "to": {at(baseMs+1000, 500*time.Microsecond)}}
	page := decode[controlplane.ReportPage](t, a.get("/api/reports?"+q.Encode(), http.StatusOK).body)
	require.Equal(t, []int64{1000}, reportStarts(page.Reports), "[%s, %s) holds window 1's start only", q["from"][0], q["to"][0])

	q = url.Values{"from": {at(baseMs, 100*time.Microsecond)}, "to": {at(baseMs, 900*time.Microsecond)}}
	r := a.do("GET", "/api/reports?"+q.Encode(), nil)
	require.Equal(t, http.StatusOK, r.code, "from is before to: an empty range, not a bad request: %s", r.body)
}
