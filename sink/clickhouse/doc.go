// Package clickhouse is keyheat's ClickHouse sink: it writes hot-key
// events and window reports to ClickHouse, and runs the documented
// queries that read them back.
//
// # Writing
//
// [Open] connects, creates the database if needed, applies the embedded
// migrations ([Migrate]) and starts a [Writer]. [Writer.WriteHotKey] and
// [Writer.WriteReport] accept items into a buffer bounded in rows; a write
// that would exceed the bound waits, which is how a slow or absent
// ClickHouse slows the consumer down instead of growing memory or
// dropping anything. A flusher inserts batches (BatchRows rows, or what
// waited FlushInterval) over the native protocol, one INSERT per table
// with an explicit column list (the detail tables in parallel, the
// reports table after them), and retries a failed batch with exponential
// backoff and jitter until it is in. Each item's AckFunc then
// says it is in ClickHouse: commit a Kafka offset only after the acks of
// everything before it. [Writer.Ready] reports whether inserts are
// failing, for a readiness endpoint.
//
// Nothing is written twice in effect: every row carries a deterministic id
// and every table is a ReplacingMergeTree whose sorting key ends in it, so
// a batch inserted again (a retry after a timeout that did reach the
// server, or items re-sent after a crash) is one logical row under FINAL.
// A window report written in two versions (partial, then complete after a
// restart) keeps both versions' rows apart by a content revision; the
// queries read the one version the reports table holds, the complete one
// when there is one.
//
// # Reading
//
// [Connect] opens a [Client] whose methods run the queries in
// schemas/clickhouse/queries and return typed rows. The SQL is the
// documented text; parameter values are bound on the client by
// clickhouse-go, quoted, since ClickHouse 18.16 has no server-side query
// parameters.
//
// # Connecting
//
// Every connection of the package (the writer's, the migrations', the
// query client's and [OpenPool]'s) is made by one function from
// [Options]: the native protocol, User and Password, and TLS when
// Options.TLS is set (the server's tcp_port_secure). [Open] and [Connect]
// ping the server first; when it refuses what they present (a
// certificate the CA does not sign or not for the name, TLS on one side
// only, a client certificate it wants, the user and password) they
// return a [RefusedError] naming the clickhouse key to fix, so a command
// fails at start instead of retrying a refusal as if the server were
// down. No error holds the password.
//
// # Versions
//
// The DDL and queries run on ClickHouse 18.16 (Debian's package) and on
// current releases. Retention (Options.RetentionDays) needs TTL, which
// came with 19.6: on older servers it is logged and ignored.
//
// What this package does not own: the message types (schemas), the table
// definitions and query texts (schemas/clickhouse), and when offsets are
// committed (the caller, from the acks).
package clickhouse
