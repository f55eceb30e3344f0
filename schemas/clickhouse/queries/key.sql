-- key: one key's history, window by window.
--
-- Parameters:
--   from, to  DateTime  windows starting in [from, to), to the second
--   app       String    the key's app; '' for the key in every app
--   key       String    the key
--   order     String    'recent': the newest windows first; 'busiest':
--                       the windows with the most events first
--   limit     UInt32    how many windows
--
-- Read from the per-app reports, whose top lists include every key of the
-- cluster's top list and more. A window in which the key did not make its
-- app's top list has no row: its events there were at most the list's
-- last entry.
SELECT
    start_ms,
    end_ms,
    key_app,
    rank,
    events,
    error,
    bytes,
    reads,
    writes,
    latency_us,
    partition,
    share
FROM report_keys FINAL
WHERE start >= {from:DateTime} AND start < {to:DateTime}
  AND scope = 'app'
  AND ({app:String} = '' OR app = {app:String})
  AND list = 'events'
  AND key = {key:String}
  AND (report_id, rev) IN (
        SELECT id, rev
        FROM reports FINAL
        WHERE start >= {from:DateTime} AND start < {to:DateTime}
          AND scope = 'app'
          AND ({app:String} = '' OR app = {app:String})
  )
ORDER BY if({order:String} = 'busiest', events, 0) DESC, start_ms DESC, key_app
LIMIT {limit:UInt32}
