package clickhouse

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/keyheat/keyheat/internal/testenv"
	"github.com/keyheat/keyheat/schemas"
)

// benchBaseMs is 2026-01-03 00:59:55 UTC: the benchmark's windows stay in
// one day, so each insert makes one part, as in production.
const benchBaseMs = fixtureBaseMs + 3_600_000

// BenchmarkWriteReports writes batches of about rows report rows (window
// reports of about 33 rows each: key lists, partitions, nodes, slots,
// advice and the report itself) through the writer to the real server and
// waits for every ack: the throughput of one flusher, seven INSERTs per
// batch (six in parallel, then one).
func BenchmarkWriteReports(b *testing.B) {
	for _, rows := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			ctx := context.Background()
			conn := testenv.ClickHouseConn(b)
			db := testenv.ClickHouseDatabase(b, conn)

			var reports []*schemas.WindowReport
			total := 0
			for windows := 1; total < rows; windows++ {
				reports, total = nil, 0
				for _, r := range makeFixture(11, windows, fixtureApps, benchBaseMs).reports {
					it, err := newReportItem(r, nil)
					if err != nil {
						b.Fatal(err)
					}
					if total+it.rows > rows {
						break
					}
					reports = append(reports, r)
					total += it.rows
				}
				if total >= rows-40 {
					break
				}
			}
			opts := testOptions(testenv.ClickHouseAddr(b), db)
			opts.BatchRows = total
			opts.MaxBufferedRows = 2 * total
			opts.FlushInterval = time.Minute
			w, err := Open(ctx, opts, Deps{})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{}, len(reports))
			ack := func(err error) {
				if err != nil {
					b.Error(err)
				}
				done <- struct{}{}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, r := range reports {
					if err := w.WriteReport(ctx, r, ack); err != nil {
						b.Fatal(err)
					}
				}
				for range reports {
					<-done
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(total), "rows/batch")
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
