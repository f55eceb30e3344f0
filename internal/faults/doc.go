// Package faults is keyheat's fault suite: the built ingest and detect
// binaries run as an operator runs them, against a Kafka broker and a
// ClickHouse server of the suite's own, while the suite does to them
// what production does: SIGKILL detect at random points, SIGKILL ingest,
// stop the broker, stop ClickHouse, fill the disk under the archive,
// starve the CPU.
//
// The input is a file the suite appends JSON access lines to, each
// carrying its line number, and `ingest tail` follows it. After every
// fault the suite checks, against what it wrote and never against
// keyheat's own figures, that
//
//   - every line is on the events topic once (read_committed);
//   - every line is in the Parquet archive once (read with DuckDB);
//   - the cluster window reports in ClickHouse (FINAL, complete ones)
//     count every closed window's events once, and the planted hot keys'
//     events in each window exactly;
//   - every planted hot key was alerted, once, on the registry topic and
//     in ClickHouse, and no other key was;
//   - each process either recovered by itself or exited with an error
//     in its log, and the suite's restart then lost nothing.
//
// How long recovery took (a kill to the new process processing again) is
// measured and logged, never asserted.
//
// The short form (five detect kills) runs with `go test ./...`, so in
// `make test`'s pass without the race detector: its tests are built only
// without it (`!race`), because what it tests is processes, their
// restarts and their outputs, which race instrumentation only slows
// down; the race detector runs over the same code in every other
// package's tests. The long
// form (a hundred) with KEYHEAT_FAULTS=long or -faults.long, or `make
// faults`. Both need the services `scripts/services.sh up` starts (for the
// broker's jars and the ClickHouse binary; the suite never stops those),
// the Python readers of `scripts/pydeps.sh up`, and root for the tmpfs
// under the archive. Under CI=true a missing piece fails the suite.
//
// The package has only tests; this file exists to say so.
package faults
