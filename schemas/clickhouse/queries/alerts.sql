-- alerts: keys that turned hot, were updated while hot, or cooled in a
-- time range, in order.
--
-- Parameters:
--   from, to  DateTime  onsets in [from, to), to the second
--   app       String    '' for every app
--   key       String    '' for every key
--   limit     UInt32    how many alerts
--
-- onset_ms is the event time at which the key crossed its rule's rate
-- (type hot, and the same on the episode's updates, which follow the hot
-- in the order they were decided: their ids end with that event time) or
-- ended its cool-down (type cooled); detected_ms the wall clock at which
-- detect published it. rate is events per second over the rule's window
-- (window_ms): at the crossing for a hot, the key's current rate for an
-- update; peak_rate the highest rate published in the episode so far
-- (0 on rows from before updates); threshold the rule's rate.
SELECT
    onset_ms,
    detected_ms,
    type,
    app,
    key,
    rule,
    rate,
    peak_rate,
    threshold,
    events,
    window_ms,
    topic,
    partition,
    reads,
    writes,
    bytes,
    mitigation,
    split
FROM hotkey_events FINAL
WHERE onset >= {from:DateTime} AND onset < {to:DateTime}
  AND ({app:String} = '' OR app = {app:String})
  AND ({key:String} = '' OR key = {key:String})
ORDER BY onset_ms, app, key, type, id
LIMIT {limit:UInt32}
