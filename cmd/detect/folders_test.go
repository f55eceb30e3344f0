package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyheat/keyheat/internal/testenv"
)

// TestRunChecksFoldersFirst: a missing archive.root stops detect run
// before it touches ClickHouse (no database made, no migration applied)
// or Kafka (the broker address is unreachable and never reported).
func TestRunChecksFoldersFirst(t *testing.T) {
	conn := testenv.ClickHouseConn(t)
	db := testenv.UniqueName(t, "keyheat")
	missing := filepath.Join(t.TempDir(), "no", "archive")
	_, _, err := execDetect(t, "run", "--archive.root="+missing, "--clickhouse.enabled",
		"--clickhouse.addr="+testenv.ClickHouseAddr(t), "--clickhouse.database="+db, "--kafka.brokers=127.0.0.1:1")
	require.ErrorContains(t, err, "archive.root")
	require.NotContains(t, err.Error(), "127.0.0.1:1")

	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	var n uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", db).Scan(&n))
	require.Zero(t, n, "ClickHouse untouched: database %s not created", db)
}

// TestReplayOutParquetFolder: --out-parquet makes a missing folder whose
// parent exists; with the parent missing too the error names the flag,
// not archive.root.
func TestReplayOutParquetFolder(t *testing.T) {
	archiveRoot := t.TempDir() // an empty archive: nothing to replay, which is no error
	parent := t.TempDir()
	out := filepath.Join(parent, "new")
	_, stderr, err := execDetect(t, "replay", "--archive="+archiveRoot, "--out-parquet="+out, "--progress=false")
	require.NoError(t, err, "stderr: %s", stderr)
	fi, err := os.Stat(out)
	require.NoError(t, err, "the folder was made")
	require.True(t, fi.IsDir())

	deep := filepath.Join(parent, "missing", "new")
	_, _, err = execDetect(t, "replay", "--archive="+archiveRoot, "--out-parquet="+deep, "--progress=false")
	require.ErrorContains(t, err, "--out-parquet="+deep)
	require.ErrorContains(t, err, "parent folder must exist")
	require.NotContains(t, err.Error(), "archive.root")
}
