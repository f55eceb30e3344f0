-- partitions: the load per events partition over a time range.
--
-- Parameters:
--   from, to  DateTime  windows starting in [from, to), to the second
--   app       String    '' for the cluster reports, else that app's reports
--
-- share is the partition's events over all events of the scope in the
-- range; peak_share its largest share in any one window, which shows a
-- burst that the range's average hides.
SELECT
    topic,
    partition,
    sum(events) AS events,
    sum(bytes) AS bytes,
    events / greatest(1, (
        SELECT sum(events)
        FROM reports FINAL
        WHERE start >= {from:DateTime} AND start < {to:DateTime}
          AND scope = if({app:String} = '', 'cluster', 'app')
          AND app = {app:String}
    )) AS share,
    max(window_share) AS peak_share,
    count() AS windows
FROM
(
    SELECT topic, partition, events, bytes, share AS window_share
    FROM report_partitions FINAL
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
)
GROUP BY topic, partition
ORDER BY events DESC, topic, partition
