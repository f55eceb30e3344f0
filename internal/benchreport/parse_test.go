package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	out := strings.Join([]string{
		"goos: linux",
		"pkg: github.com/keyheat/keyheat/pipeline",
		"BenchmarkProcess/keyed=true/rate=1000k/s-2         \t 2000000\t       312.5 ns/op\t       0 B/op\t       0 allocs/op",
		// A name, then what the benchmark logged, then its figures.
		"BenchmarkEndToEnd/kfake/rate=1000/codec=json/detect-2  \ttime=2026-01-01 level=INFO msg=joined",
		"more log",
		"       1\t4100000000 ns/op\t      4100 ns/event\t  243000 events/s",
		"--- BENCH: BenchmarkOnsetToMitigation/broker=kafka-2",
		"    onset_bench_test.go:66: 100 onsets",
		"BenchmarkFranz-go-2\t       3\t  1.5e+06 ns/op",
		"PASS",
		"ok  \tgithub.com/keyheat/keyheat/pipeline\t12.3s",
	}, "\n")
	got, err := parse(strings.NewReader(out), 2)
	require.NoError(t, err)
	require.Equal(t, []result{
		{name: "BenchmarkProcess/keyed=true/rate=1000k/s", n: 2000000,
			vals: map[string]float64{"ns/op": 312.5, "B/op": 0, "allocs/op": 0}},
		{name: "BenchmarkEndToEnd/kfake/rate=1000/codec=json/detect", n: 1,
			vals: map[string]float64{"ns/op": 4.1e9, "ns/event": 4100, "events/s": 243000}},
		{name: "BenchmarkFranz-go", n: 3, vals: map[string]float64{"ns/op": 1.5e6}},
	}, got)
}

func TestParseOneProc(t *testing.T) {
	// With GOMAXPROCS 1 go test adds no suffix: a name ending in a
	// number keeps it.
	got, err := parse(strings.NewReader("BenchmarkX/keys=2\t 10\t 5 ns/op\n"), 1)
	require.NoError(t, err)
	require.Equal(t, []result{{name: "BenchmarkX/keys=2", n: 10, vals: map[string]float64{"ns/op": 5}}}, got)
}

func TestParseSkipsFailures(t *testing.T) {
	// A benchmark that failed prints its name and then the failure: no
	// result, and the next benchmark's line is read as its own.
	out := "BenchmarkA-2   \t--- FAIL: BenchmarkA-2\n    a_test.go:1: boom\nBenchmarkB-2\t 1\t 7 ns/op\n"
	got, err := parse(strings.NewReader(out), 2)
	require.NoError(t, err)
	require.Equal(t, []result{{name: "BenchmarkB", n: 1, vals: map[string]float64{"ns/op": 7}}}, got)
}
