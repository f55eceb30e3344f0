-- keyheat's tables, version 1.
--
-- Every statement here and in later migrations must be harmless to run
-- twice: two detect instances starting at once may both apply a migration
-- before either has recorded it (ClickHouse has no lock to stop that).
-- Hence CREATE TABLE IF NOT EXISTS; ClickHouse 18.16 has no
-- ADD COLUMN IF NOT EXISTS, so the migration runner takes "column already
-- exists" as done.
--
-- The SQL keeps to what ClickHouse 18.16 (Debian's package) and current
-- releases share: no TTL (applied separately where the server has it), no
-- DateTime64 (event times are Int64 Unix milliseconds beside a DateTime of
-- the same second, which partitions and orders), no Map, no LowCardinality
-- (Enum8 for the few fixed vocabularies).
--
-- Every row has a deterministic id, and every table is a ReplacingMergeTree
-- whose sorting key ends in that id. The columns before the id are fixed by
-- the id (the id is built from them), so two rows with the same id have the
-- same sorting key and collapse into one: a batch sent again after a crash
-- leaves one logical row. Read with FINAL (or argMax) to see it before a
-- background merge has run.

-- hotkey_events: one row per schemas.HotKeyEvent (a key turned hot, or
-- cooled). id is the event's ID: topic, partition, rule, type, app, key and
-- onset time. Ordered for "this app's (and key's) alerts in a time range".
CREATE TABLE IF NOT EXISTS hotkey_events
(
    id          String,
    type        Enum8('hot' = 1, 'cooled' = 2),
    app         String,
    key         String,
    key_hash    String,
    rule        String,
    rate        Float64,
    threshold   Float64,
    events      UInt64,
    window_ms   Int64,
    topic       String,
    partition   Int32,
    onset       DateTime,
    onset_ms    Int64,
    detected_ms Int64,
    reads       UInt64,
    writes      UInt64,
    bytes       UInt64,
    mitigation  String,
    split       UInt32
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(onset)
ORDER BY (app, key, onset, id);

-- reports: one row per schemas.WindowReport (a window of the cluster, or
-- of one app): its totals and skew scalars. id is the report's ID (scope,
-- app, window start).
--
-- A report is deterministic unless the merger gave up waiting for a
-- partition (partial). A window can then be written twice with different
-- content: partial, and complete after a restart. rev names the content
-- (0 for a complete report, a hash of the missing partitions otherwise),
-- and the version column complete makes the complete report win over a
-- partial one (among partial ones, the last written wins). The detail
-- tables below keep each rev's rows apart; queries join them to the rev
-- this table holds, so a window never counts twice and never mixes two
-- versions.
CREATE TABLE IF NOT EXISTS reports
(
    id            String,
    rev           UInt64,
    complete      UInt8,
    scope         Enum8('cluster' = 1, 'app' = 2),
    app           String,
    start         DateTime,
    start_ms      Int64,
    end_ms        Int64,
    topics        Array(String),
    events        UInt64,
    bytes         UInt64,
    reads         UInt64,
    writes        UInt64,
    latency_us    UInt64,
    late          UInt64,
    distinct_keys UInt64,
    keyed         UInt8,
    partial       UInt8,
    missing       Array(String),
    max_mean      Float64,
    gini          Float64,
    top1_share    Float64,
    top10_share   Float64,
    node_max_mean Float64,
    node_gini     Float64
)
ENGINE = ReplacingMergeTree(complete)
PARTITION BY toYYYYMMDD(start)
ORDER BY (scope, app, start, id);

-- report_keys: a report's ranked key lists, one row per key and list:
-- events (Top), bytes (TopBytes, the big keys), reads, writes and latency.
-- app is the report's app ('' for the cluster scope), key_app the key's
-- own app. id is report id, rev, list, key_app and key.
CREATE TABLE IF NOT EXISTS report_keys
(
    id         String,
    report_id  String,
    rev        UInt64,
    scope      Enum8('cluster' = 1, 'app' = 2),
    app        String,
    start      DateTime,
    start_ms   Int64,
    end_ms     Int64,
    list       Enum8('events' = 1, 'bytes' = 2, 'reads' = 3, 'writes' = 4, 'latency' = 5),
    rank       UInt16,
    key_app    String,
    key        String,
    events     UInt64,
    error      UInt64,
    bytes      UInt64,
    reads      UInt64,
    writes     UInt64,
    latency_us UInt64,
    partition  Int32,
    share      Float64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(start)
ORDER BY (scope, app, list, start, key_app, key, id);

-- report_partitions: a report's load per events partition.
CREATE TABLE IF NOT EXISTS report_partitions
(
    id        String,
    report_id String,
    rev       UInt64,
    scope     Enum8('cluster' = 1, 'app' = 2),
    app       String,
    start     DateTime,
    start_ms  Int64,
    end_ms    Int64,
    topic     String,
    partition Int32,
    events    UInt64,
    bytes     UInt64,
    share     Float64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(start)
ORDER BY (scope, app, start, topic, partition, id);

-- report_nodes: a report's load per Redis Cluster node.
CREATE TABLE IF NOT EXISTS report_nodes
(
    id         String,
    report_id  String,
    rev        UInt64,
    scope      Enum8('cluster' = 1, 'app' = 2),
    app        String,
    start      DateTime,
    start_ms   Int64,
    end_ms     Int64,
    node       String,
    first_slot UInt16,
    last_slot  UInt16,
    events     UInt64,
    share      Float64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(start)
ORDER BY (scope, app, start, node, id);

-- report_slots: a report's hottest Redis Cluster hash slots.
CREATE TABLE IF NOT EXISTS report_slots
(
    id        String,
    report_id String,
    rev       UInt64,
    scope     Enum8('cluster' = 1, 'app' = 2),
    app       String,
    start     DateTime,
    start_ms  Int64,
    end_ms    Int64,
    rank      UInt16,
    slot      UInt16,
    events    UInt64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(start)
ORDER BY (scope, app, start, slot, id);

-- report_advice: the mitigation a report suggests for each hot key.
CREATE TABLE IF NOT EXISTS report_advice
(
    id         String,
    report_id  String,
    rev        UInt64,
    scope      Enum8('cluster' = 1, 'app' = 2),
    app        String,
    start      DateTime,
    start_ms   Int64,
    end_ms     Int64,
    key_app    String,
    key        String,
    rate       Float64,
    read_share Float64,
    mitigation String,
    split      UInt32
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMMDD(start)
ORDER BY (scope, app, start, key_app, key, id);
