-- keyheat's tables, version 3: cluster alerts. On a topic not keyed by
-- access key the merger decides a key's hot/cooled over every partition:
-- such a row has partition -1, the partitions whose counts it sums in
-- partitions, and in error how far above events the key's count may be
-- (schemas.HotKeyEvent.Error). Rows written before read an empty list
-- and 0, which is what a partition's own alert says.
ALTER TABLE hotkey_events ADD COLUMN partitions Array(Int32) DEFAULT [];
ALTER TABLE hotkey_events ADD COLUMN error UInt64 DEFAULT 0;
