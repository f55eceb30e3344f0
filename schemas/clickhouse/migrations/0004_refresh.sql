-- keyheat's tables, version 4: refreshes. While a key stays hot, detect
-- publishes it again, type 'update', when its rate over its rule's window
-- moved by pipeline.detect.refresh_change (±25 % by default) of the last
-- rate published for it: rate, events, reads, writes, bytes and advice
-- (mitigation, split) are the key's over the window ending at the
-- update's slot boundary, whose event time the id ends with; onset_ms is
-- the episode's onset (the hot's), so an episode's rows share it.
-- peak_rate is the highest rate published in the episode so far: a hot's
-- own rate, an update's peak, a cooled's peak.
--
-- The type column gains the value; an Enum8 change that only adds a
-- value rewrites no data (18.16 and current releases alike), and running
-- it twice is harmless. Rows written before read peak_rate 0, which no
-- published row has (a hot key's rate is above 0): "unknown".
ALTER TABLE hotkey_events MODIFY COLUMN type Enum8('hot' = 1, 'cooled' = 2, 'update' = 3);
ALTER TABLE hotkey_events ADD COLUMN peak_rate Float64 DEFAULT 0;
