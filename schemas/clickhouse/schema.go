package clickhouse

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

//go:embed queries/*.sql
var queryFiles embed.FS

// MigrationsTable records which migrations a database has applied. It is
// created, if missing, before any migration runs; see [MigrationsTableDDL].
const MigrationsTable = "keyheat_migrations"

// MigrationsTableDDL creates MigrationsTable. It is a ReplacingMergeTree
// keyed by version, so two instances that both record a migration leave
// one logical row.
const MigrationsTableDDL = `CREATE TABLE IF NOT EXISTS ` + MigrationsTable + ` (
    version    UInt32,
    name       String,
    checksum   String,
    applied_at DateTime
)
ENGINE = ReplacingMergeTree()
ORDER BY version`

// Migration is one migrations/NNNN_name.sql file.
type Migration struct {
	// Version is NNNN: migrations apply in increasing version.
	Version int
	// Name is the file name's part after the version.
	Name string
	// Statements are the file's SQL statements, without comment lines,
	// each without its closing semicolon.
	Statements []string
	// Checksum is the hex SHA-256 of the file: a database that applied a
	// migration whose file has changed since is refused, since CREATE
	// TABLE IF NOT EXISTS would silently keep the old definition.
	Checksum string
}

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_name.sql", e.Name())
		}
		text, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		version, _ := strconv.Atoi(m[1]) // four digits: always a number
		stmts := SplitStatements(string(text))
		if len(stmts) == 0 {
			return nil, fmt.Errorf("migration %s holds no statement", e.Name())
		}
		sum := sha256.Sum256(text)
		out = append(out, Migration{Version: version, Name: m[2], Statements: stmts, Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations have version %04d", out[i].Version)
		}
	}
	return out, nil
}

// SplitStatements splits SQL text into statements: it drops lines that
// are only a -- comment and ends a statement at a line ending in a
// semicolon. It is made for the files of this package, which put no
// semicolon at a line's end inside a string literal.
func SplitStatements(text string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "--") {
			continue
		}
		end := strings.HasSuffix(t, ";")
		if end {
			line = strings.TrimRight(line, " \t\r")
			line = line[:len(line)-1]
		}
		if t != "" || cur.Len() > 0 {
			cur.WriteString(strings.TrimRight(line, " \t\r"))
			cur.WriteByte('\n')
		}
		if end {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, s)
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// Names of the documented queries, each queries/<name>.sql.
const (
	QueryTop        = "top"
	QuerySkew       = "skew"
	QueryPartitions = "partitions"
	QueryNodes      = "nodes"
	QuerySlots      = "slots"
	QueryKey        = "key"
	QueryAlerts     = "alerts"
)

// QueryNames lists every documented query.
func QueryNames() []string {
	return []string{QueryTop, QuerySkew, QueryPartitions, QueryNodes, QuerySlots, QueryKey, QueryAlerts}
}

// Query returns the text of a documented query as its file holds it,
// comments included: what the README quotes and a user pastes into
// clickhouse-client.
func Query(name string) (string, error) {
	b, err := queryFiles.ReadFile("queries/" + name + ".sql")
	if err != nil {
		return "", fmt.Errorf("query %q: %w (known: %s)", name, err, strings.Join(QueryNames(), ", "))
	}
	return string(b), nil
}

// Param is a query parameter, {Name:Type} in a query's text.
type Param struct {
	Name string
	Type string
}

var paramRe = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*):([A-Za-z0-9_() ,']+)\}`)

// Params returns the distinct parameters of a query text, in order of
// first use. A name used with two types is an error.
func Params(text string) ([]Param, error) {
	var out []Param
	for _, m := range paramRe.FindAllStringSubmatch(text, -1) {
		p := Param{Name: m[1], Type: strings.TrimSpace(m[2])}
		i := slices.IndexFunc(out, func(q Param) bool { return q.Name == p.Name })
		switch {
		case i < 0:
			out = append(out, p)
		case out[i].Type != p.Type:
			return nil, fmt.Errorf("parameter %s declared as %s and as %s", p.Name, out[i].Type, p.Type)
		}
	}
	return out, nil
}

// ClientBound rewrites every {name:Type} of a query into @name, the
// placeholder clickhouse-go binds on the client (quoting strings), for
// servers without query parameters (18.16). The comment lines go too: the
// driver would take an @word in a comment for a placeholder.
func ClientBound(text string) string {
	return paramRe.ReplaceAllString(strings.Join(SplitStatements(text), ";\n"), "@$1")
}

// Table is one of keyheat's tables and the DateTime column that ages its
// rows out under a retention.
type Table struct {
	Name       string
	TimeColumn string
}

// Tables lists the tables the migrations create, with their time columns.
func Tables() []Table {
	return []Table{
		{"hotkey_events", "onset"},
		{"reports", "start"},
		{"report_keys", "start"},
		{"report_partitions", "start"},
		{"report_nodes", "start"},
		{"report_slots", "start"},
		{"report_advice", "start"},
	}
}

// TTLStatement returns the ALTER that makes t drop rows older than days
// days. Run it only on a server that [SupportsTTL]: 18.16 rejects it.
func TTLStatement(t Table, days int) string {
	return fmt.Sprintf("ALTER TABLE %s MODIFY TTL %s + INTERVAL %d DAY", t.Name, t.TimeColumn, days)
}

// TTLApplied reports whether a table's engine_full (system.tables) shows
// the TTL that TTLStatement(t, days) sets, in the form current servers
// print it, so a restart does not alter (and rewrite) the table again. A
// server that prints it differently gets the ALTER again, which changes
// nothing but costs a mutation.
func TTLApplied(engineFull string, t Table, days int) bool {
	return strings.Contains(engineFull, fmt.Sprintf("TTL %s + toIntervalDay(%d)", t.TimeColumn, days))
}

// SupportsTTL reports whether a server of this version (SELECT version(),
// e.g. "18.16.1" or "26.9.2.1") has table TTL, which ClickHouse added in
// 19.6.
func SupportsTTL(version string) (bool, error) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false, fmt.Errorf("clickhouse version %q: want major.minor[.patch…]", version)
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false, fmt.Errorf("clickhouse version %q: want major.minor[.patch…]", version)
	}
	return major > 19 || (major == 19 && minor >= 6), nil
}
