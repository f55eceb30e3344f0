-- slots: the hottest Redis Cluster hash slots over a time range.
--
-- Parameters:
--   from, to  DateTime  windows starting in [from, to), to the second
--   app       String    '' for the cluster reports, else that app's reports
--   limit     UInt32    how many slots
--
-- A report lists only its window's hottest slots, so a slot's events are
-- summed over the windows that listed it: a lower bound of its total.
SELECT
    slot,
    sum(events) AS events,
    count() AS windows,
    min(start_ms) AS first_ms,
    max(start_ms) AS last_ms
FROM report_slots FINAL
WHERE start >= {from:DateTime} AND start < {to:DateTime}
  AND scope = if({app:String} = '', 'cluster', 'app')
  AND app = {app:String}
  AND (report_id, rev) IN (
        SELECT id, rev
        FROM reports FINAL
        WHERE start >= {from:DateTime} AND start < {to:DateTime}
          AND scope = if({app:String} = '', 'cluster', 'app')
          AND app = {app:String}
  )
GROUP BY slot
ORDER BY events DESC, slot
LIMIT {limit:UInt32}
