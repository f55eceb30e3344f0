// Package clickhouse holds keyheat's ClickHouse formats: the migrations
// that create its tables (migrations/*.sql) and the documented queries
// that answer "what was hot, where, when" (queries/*.sql), embedded so the
// binary carries them and the README can quote them verbatim.
//
// The SQL runs on ClickHouse 18.16 (Debian's package) and on current
// releases. It keeps to their common subset; retention (TTL, ClickHouse
// 19.6 and later) is the one extra, applied only where the server has it,
// through [TTLStatement].
//
// Queries take ClickHouse query parameters, {name:Type}, so a current
// clickhouse-client runs a file as it stands (--param_name=value). 18.16
// has no query parameters: the sink binds the values into the text on the
// client, quoting them, and never concatenates user input into SQL.
//
// This package only holds and parses text; sink/clickhouse applies the
// migrations, writes the rows and runs the queries.
package clickhouse
