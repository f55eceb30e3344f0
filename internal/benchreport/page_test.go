package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSig3(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {312.5, "312"}, {313.5, "314"}, {20.94, "20.9"}, {0.01234, "0.0123"}, {4100, "4,100"},
		{243_456, "243,000"}, {1_500_000, "1,500,000"}, {-2.5, "-2.50"}, {999.6, "1,000"},
	} {
		require.Equal(t, tc.want, sig3(tc.v), "sig3(%v)", tc.v)
	}
}

func TestCellAndRatio(t *testing.T) {
	require.Equal(t, "—", cell(nil, sig3))
	require.Equal(t, "5.00 ns", cell([]float64{5}, with(" ns")))
	require.Equal(t, "20.0 (10.0–40.0)", cell([]float64{40, 10, 20}, sig3))
	require.Equal(t, "9.00", cell([]float64{9, 9}, sig3), "equal runs show one value")
	require.Equal(t, "2.00×", ratio([]float64{4, 8}, []float64{3}))
	require.Equal(t, "—", ratio([]float64{4}, nil))
	require.Equal(t, "—", ratio([]float64{4}, []float64{0}))
}

func TestResults(t *testing.T) {
	rs := results{
		{name: "BenchmarkA", vals: map[string]float64{"ns/op": 3}},
		{name: "BenchmarkB", vals: map[string]float64{"ns/op": 9}},
		{name: "BenchmarkA", vals: map[string]float64{"ns/op": 5, "B/op": 1}},
	}
	require.Equal(t, []float64{3, 5}, rs.vals("BenchmarkA", "ns/op"))
	require.Equal(t, []float64{1}, rs.vals("BenchmarkA", "B/op"))
	require.True(t, rs.has("BenchmarkB"))
	require.False(t, rs.has("BenchmarkC"))
}

func TestTable(t *testing.T) {
	var tb table
	tb.head = []string{"a", "b"}
	tb.row("1", "x|y")
	require.Equal(t, "| a | b |\n|---|---|\n| 1 | x\\|y |\n", tb.String())
}

func TestRunString(t *testing.T) {
	r := run{pkg: "./pipeline/", bench: "BenchmarkProcess$", benchtime: "3x", count: 2, benchmem: true}
	require.Equal(t, "go test -run '^$' -bench 'BenchmarkProcess$' -benchtime 3x -count 2 -benchmem -timeout 20m ./pipeline/", r.String())
}
