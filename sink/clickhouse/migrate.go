package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	chschema "github.com/keyheat/keyheat/schemas/clickhouse"
)

// MigrateResult says what Migrate did.
type MigrateResult struct {
	// ServerVersion is the server's version().
	ServerVersion string
	// Applied are the versions of the migrations this call ran, in order;
	// empty when the database was up to date.
	Applied []int
	// TTLSet names the tables whose retention this call (re)set.
	TTLSet []string
}

// ClickHouse error codes Migrate treats as "already done": another
// instance applied the same statement first.
const (
	codeDuplicateColumn    = 44
	codeTableAlreadyExists = 57
)

// migrateAttempts bounds how often one statement is tried: a second try
// covers a concurrent instance's DDL on the same table, which 18.16 can
// report as an error instead of waiting for it.
const migrateAttempts = 4

// Migrate brings the connection's database up to the embedded migrations
// and records each in the keyheat_migrations table, so a second start
// applies nothing. A migration recorded with a different checksum is an
// error: its file was edited after it was applied, and CREATE TABLE IF NOT
// EXISTS would silently keep the old definition.
//
// Two instances migrating at once may both apply a migration before
// either records it; ClickHouse has no lock to prevent it. That is
// harmless by construction: every statement is idempotent (IF NOT EXISTS,
// or a duplicate column taken as done), and the record is a
// ReplacingMergeTree row keyed by version, so both records are one row.
//
// With retentionDays > 0 and a server that has TTL (19.6 and later), it
// then sets each table's TTL, skipping tables that already have it; on an
// older server it logs that retention is off.
func Migrate(ctx context.Context, conn driver.Conn, retentionDays int, log *slog.Logger) (MigrateResult, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var res MigrateResult
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&res.ServerVersion); err != nil {
		return res, fmt.Errorf("ask clickhouse its version: %w", err)
	}
	migrations, err := chschema.Migrations()
	if err != nil {
		return res, err
	}
	if err := execIdempotent(ctx, conn, chschema.MigrationsTableDDL); err != nil {
		return res, fmt.Errorf("create %s: %w", chschema.MigrationsTable, err)
	}
	applied, err := appliedMigrations(ctx, conn)
	if err != nil {
		return res, err
	}
	known := make(map[int]bool, len(migrations))
	for _, m := range migrations {
		known[m.Version] = true
		if sum, ok := applied[m.Version]; ok {
			if sum != m.Checksum {
				return res, fmt.Errorf("clickhouse migration %04d_%s was applied with checksum %s, the embedded file has %s: "+
					"an applied migration must not change; add a new migration instead", m.Version, m.Name, sum, m.Checksum)
			}
			continue
		}
		for i, stmt := range m.Statements {
			if err := execIdempotent(ctx, conn, stmt); err != nil {
				return res, fmt.Errorf("clickhouse migration %04d_%s, statement %d: %w", m.Version, m.Name, i+1, err)
			}
		}
		if err := recordMigration(ctx, conn, m); err != nil {
			return res, fmt.Errorf("record clickhouse migration %04d_%s: %w", m.Version, m.Name, err)
		}
		log.Info("applied clickhouse migration", "version", m.Version, "name", m.Name)
		res.Applied = append(res.Applied, m.Version)
	}
	for v := range applied {
		if !known[v] {
			log.Warn("the clickhouse database has a migration this binary does not know; a newer keyheat wrote it",
				"version", v)
		}
	}
	if retentionDays > 0 {
		res.TTLSet, err = setRetention(ctx, conn, res.ServerVersion, retentionDays, log)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// recordMigration inserts m's record through a prepared batch: over the
// native protocol, ClickHouse 18.16 waits for a data block after an INSERT
// even when the query carries its VALUES.
func recordMigration(ctx context.Context, conn driver.Conn, m chschema.Migration) (err error) {
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+chschema.MigrationsTable+" (version, name, checksum, applied_at)")
	if err != nil {
		return err
	}
	if err := b.Append(uint32(m.Version), m.Name, m.Checksum, time.Now()); err != nil {
		return errors.Join(err, b.Abort())
	}
	return b.Send()
}

func appliedMigrations(ctx context.Context, conn driver.Conn) (map[int]string, error) {
	rows, err := conn.Query(ctx, "SELECT version, checksum FROM "+chschema.MigrationsTable+" FINAL")
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", chschema.MigrationsTable, err)
	}
	defer rows.Close() //nolint:errcheck // rows.Err below reports what matters
	applied := map[int]string{}
	for rows.Next() {
		var v uint32
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			return nil, fmt.Errorf("read %s: %w", chschema.MigrationsTable, err)
		}
		applied[int(v)] = sum
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", chschema.MigrationsTable, err)
	}
	return applied, nil
}

// execIdempotent runs a migration statement, taking "already exists" as
// done and trying again, a few times, after any other error.
func execIdempotent(ctx context.Context, conn driver.Conn, stmt string) error {
	var err error
	for attempt := range migrateAttempts {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * 200 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return errors.Join(err, ctx.Err())
			}
		}
		err = conn.Exec(ctx, stmt)
		var ex *chgo.Exception
		if err == nil || errors.As(err, &ex) && (ex.Code == codeDuplicateColumn || ex.Code == codeTableAlreadyExists) {
			return nil
		}
	}
	return err
}

func setRetention(ctx context.Context, conn driver.Conn, version string, days int, log *slog.Logger) ([]string, error) {
	ok, err := chschema.SupportsTTL(version)
	if err != nil {
		return nil, err
	}
	if !ok {
		log.Warn("clickhouse has no TTL before 19.6; retention is off, rows are kept", "server_version", version,
			"retention_days", days)
		return nil, nil
	}
	var set []string
	for _, t := range chschema.Tables() {
		var engine string
		if err := conn.QueryRow(ctx, "SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = @t",
			chgo.Named("t", t.Name)).Scan(&engine); err != nil {
			return set, fmt.Errorf("read the definition of %s: %w", t.Name, err)
		}
		if chschema.TTLApplied(engine, t, days) {
			continue
		}
		if err := conn.Exec(ctx, chschema.TTLStatement(t, days)); err != nil {
			return set, fmt.Errorf("set retention of %s: %w", t.Name, err)
		}
		log.Info("set clickhouse retention", "table", t.Name, "days", days)
		set = append(set, t.Name)
	}
	return set, nil
}
