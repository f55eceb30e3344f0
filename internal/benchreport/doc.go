// Command benchreport runs keyheat's benchmark suite and writes
// BENCHMARKS.md: the machine (CPU model, cores, OS, Go version), the date,
// and each figure with the go test command that measured it. `make bench`
// runs it from the repository root:
//
//	eval "$(scripts/services.sh env)"   # the real Kafka and ClickHouse, for the figures that use them
//	make bench
//
// The suite (suite.go) is a list of figures; each runs one or more
// `go test -run '^$' -bench …` commands one after another (never two at
// once: they would share the cores), parses the standard benchmark lines
// of their output and renders a table. go test's whole output goes to the
// file -raw names, in the format benchstat reads. A figure whose service
// is not configured (KEYHEAT_TEST_CLICKHOUSE, KEYHEAT_TEST_KAFKA) is not
// run, and the page says so. No figure is a pass/fail check: a benchmark
// that fails is shown as failed on the page, and the command exits non-zero
// once the page is written.
//
// Timings on a shared machine move with the other work on it; where a
// comparison is meant, a figure runs its baseline in the same command
// (raw franz-go next to detect, the bare loop next to the pipeline core)
// and the page gives the ratio.
//
// It owns the generated page and its format. It does not own the
// benchmarks it runs (they live beside the code they measure) nor the
// history of past measurements (docs/benchmarks-history.md).
package main
