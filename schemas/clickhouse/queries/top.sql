-- top: the heaviest keys over a time range.
--
-- Parameters:
--   from, to  DateTime  windows starting in [from, to), to the second (UTC
--                       unless the server's time zone says otherwise)
--   app       String    '' for the cluster reports, else that app's reports
--   list      String    rank by: events, bytes, reads, writes or latency
--   limit     UInt32    how many keys
--
-- A key's figures are summed over the windows whose top list it made: a
-- lower bound of its total when it dropped out of some windows' lists.
-- share is events over all events of the scope in the range. error sums
-- the per-window bounds: true events >= events - error. windows counts the
-- windows the key was listed in; first_ms and last_ms are the first and
-- last of their starts (Unix ms).
--
-- key_app is the key's own app (in the cluster's reports keys of every app
-- compete). It is not called app: ClickHouse lets an alias shadow a column
-- in WHERE, and app there must be the report's app.
--
-- FINAL collapses rows written twice (a batch resent after a crash); the
-- IN keeps, per window, the rows of the report version the reports table
-- holds (a complete report wins over a partial one).
SELECT
    key_app,
    key,
    sum(events) AS events,
    sum(error) AS error,
    sum(bytes) AS bytes,
    sum(reads) AS reads,
    sum(writes) AS writes,
    sum(latency_us) AS latency_us,
    events / greatest(1, (
        SELECT sum(events)
        FROM reports FINAL
        WHERE start >= {from:DateTime} AND start < {to:DateTime}
          AND scope = if({app:String} = '', 'cluster', 'app')
          AND app = {app:String}
    )) AS share,
    count() AS windows,
    min(start_ms) AS first_ms,
    max(start_ms) AS last_ms
FROM report_keys FINAL
WHERE start >= {from:DateTime} AND start < {to:DateTime}
  AND scope = if({app:String} = '', 'cluster', 'app')
  AND app = {app:String}
  AND list = {list:String}
  AND (report_id, rev) IN (
        SELECT id, rev
        FROM reports FINAL
        WHERE start >= {from:DateTime} AND start < {to:DateTime}
          AND scope = if({app:String} = '', 'cluster', 'app')
          AND app = {app:String}
  )
GROUP BY key_app, key
ORDER BY
    multiIf({list:String} = 'bytes', bytes,
            {list:String} = 'reads', reads,
            {list:String} = 'writes', writes,
            {list:String} = 'latency', latency_us,
            events) DESC,
    key_app, key
LIMIT {limit:UInt32}
