-- nodes: the load per Redis Cluster node over a time range.
--
-- Parameters:
--   from, to  DateTime  windows starting in [from, to), to the second
--   app       String    '' for the cluster reports, else that app's reports
--
-- Nodes are the configured nodes (or equal slot ranges, "shard-N"), with
-- their slot ranges as of the range's last window. share and peak_share
-- as in the partitions query.
SELECT
    node,
    argMax(first_slot, start_ms) AS first_slot,
    argMax(last_slot, start_ms) AS last_slot,
    sum(events) AS events,
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
    SELECT node, first_slot, last_slot, start_ms, events, share AS window_share
    FROM report_nodes FINAL
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
GROUP BY node
ORDER BY events DESC, node
