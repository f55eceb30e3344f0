package logparse

import (
	"fmt"
	"testing"

	"github.com/keyheat/keyheat/schemas"
)

// benchLines makes n distinct realistic lines of format so the benchmark
// is not one line hot in cache.
func benchLines(format string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		switch format {
		case "combined":
			out[i] = fmt.Appendf(nil, `10.%d.%d.%d - - [17/Mar/2025:14:02:%02d +0000] "GET /api/product/%d?ref=home&page=%d HTTP/1.1" 200 %d "https://shop.example.com/" "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/122.0 Safari/537.36"`,
				i%256, i/7%256, i/13%256, i%60, i*7919%100000, i%10, 1000+i%5000)
		case "json":
			out[i] = fmt.Appendf(nil, `{"time":%d,"key":"product:%d","app":"catalog","op":"GET","bytes":%d,"status":200,"client":"10.0.%d.%d","node":"cache-%d","latency_us":%d}`,
				1742220131000+int64(i), i*7919%100000, 1000+i%5000, i%256, i/7%256, i%8, 100+i%900)
		case "redis":
			out[i] = fmt.Appendf(nil, `1742220131.%06d [0 10.0.%d.%d:5%04d] "GET" "user:%d"`, i%1000000, i%256, i/7%256, i%10000, i*7919%100000)
		}
	}
	return out
}

func BenchmarkParse(b *testing.B) {
	parsers := []struct {
		format string
		p      Parser
	}{
		{"combined", must(NewCombined(CombinedConfig{}, "shop"))},
		{"json", must(NewJSON(DefaultJSONConfig(), ""))},
		{"redis", NewRedis("")},
	}
	for _, tc := range parsers {
		lines := benchLines(tc.format, 4096)
		b.Run(tc.format, func(b *testing.B) {
			evs := make([]schemas.AccessEvent, 0, 1)
			var size int64
			for _, l := range lines {
				size += int64(len(l))
			}
			b.SetBytes(size / int64(len(lines)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var err error
				if evs, _, err = tc.p.Parse(evs[:0], lines[i&4095]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
