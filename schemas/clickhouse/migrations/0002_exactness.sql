-- keyheat's tables, version 2: what a report says about its exactness,
-- and which keys are shortened forms of longer ones.
--
-- ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS: the migration runner
-- takes "column already exists" as done, so running this twice is
-- harmless. Rows written before this migration read the defaults, which
-- claim nothing: approximate 1 (reports then came from a bounded top-K),
-- guaranteed 0, shortened 0 (keys were then shortened past 256 bytes by
-- default, unmarked).

-- reports.approximate: the report may differ from the exact answer
-- (schemas.WindowReport.Approximate); 0 means its top list is the exact
-- top of the window with exact counts. reports.guaranteed: how many keys
-- at the head of the events list (report_keys, list = 'events', rank up
-- to it) are surely the heaviest of the window.
ALTER TABLE reports ADD COLUMN approximate UInt8 DEFAULT 1;
ALTER TABLE reports ADD COLUMN guaranteed UInt32 DEFAULT 0;

-- report_keys.shortened and hotkey_events.shortened: the key was longer
-- than pipeline.max_key_bytes and is stored as its prefix, "…" and 16 hex
-- digits of the whole key's xxh3 hash.
ALTER TABLE report_keys ADD COLUMN shortened UInt8 DEFAULT 0;
ALTER TABLE hotkey_events ADD COLUMN shortened UInt8 DEFAULT 0;
