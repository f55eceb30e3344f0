package controlplane_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/controlplane"
	"github.com/keyheat/keyheat/schemas"
)

// benchReport is a report the size detect's defaults make: 100 top keys
// and 10 in each of the four other lists.
func benchReport(scope, app string, w int) *schemas.WindowReport {
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "product:" + strconv.Itoa(i*7919)
	}
	r := windowReport(scope, app, w, keys...)
	r.TopBytes, r.TopReads, r.TopWrites, r.TopLatency = r.Top[:10], r.Top[10:20], r.Top[20:30], r.Top[30:40]
	return r
}

// BenchmarkAddReport: what detect's merger pays per report, into a
// History at its bounds, so that every add drops a window. With one app
// the window count per scope bounds it; with 100 apps (detect's default
// merge.max_apps) the byte bound does, and each add looks for the oldest
// window over every scope.
func BenchmarkAddReport(b *testing.B) {
	for _, tc := range []struct {
		name string
		apps int
		cfg  controlplane.HistoryConfig
	}{
		{"apps=1", 1, controlplane.HistoryConfig{}},
		{"apps=100", 100, controlplane.HistoryConfig{}},
		{"apps=100/max_bytes=16MiB", 100, controlplane.HistoryConfig{MaxBytes: 16 << 20}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := newHistory(b, tc.cfg)
			reports := make([]*schemas.WindowReport, tc.apps)
			for i := range reports {
				reports[i] = benchReport(schemas.ScopeApp, "app"+strconv.Itoa(i), 0)
			}
			// Fill to the bounds first.
			for w := range controlplane.DefaultHistoryWindows {
				for _, r := range reports {
					c := *r
					c.StartMs = int64(w) * 1000
					h.AddReport(&c)
				}
			}
			copies := make([]schemas.WindowReport, b.N)
			for i := range copies {
				copies[i] = *reports[i%tc.apps]
				copies[i].StartMs = int64(controlplane.DefaultHistoryWindows+i/tc.apps) * 1000
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				h.AddReport(&copies[i])
			}
		})
	}
}

// BenchmarkReportsLatest: GET /api/reports/latest of a report of
// detect's default size, through the whole handler (route, auth,
// metrics), served from the cached encoding; "new_report" adds a new
// window before each request, so every answer encodes its report.
func BenchmarkReportsLatest(b *testing.B) {
	for _, fresh := range []bool{false, true} {
		name := "cached"
		if fresh {
			name = "new_report"
		}
		b.Run(name, func(b *testing.B) {
			h := newHistory(b, controlplane.HistoryConfig{})
			s := plainHistoryServer(b, h)
			h.AddReport(benchReport(schemas.ScopeCluster, "", 0))
			rec := httpRecord(s, "GET", "/api/reports/latest", nil, "")
			require.Equal(b, http.StatusOK, rec.Code)
			b.SetBytes(int64(rec.Body.Len()))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if fresh {
					b.StopTimer()
					h.AddReport(benchReport(schemas.ScopeCluster, "", i+1))
					b.StartTimer()
				}
				if rec := httpRecord(s, "GET", "/api/reports/latest", nil, ""); rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body.Bytes())
				}
			}
		})
	}
}
