-- skew: the most skewed windows of a time range.
--
-- Parameters:
--   from, to  DateTime  windows starting in [from, to), to the second
--   app       String    '' for the cluster reports, else that app's reports
--   limit     UInt32    how many windows
--
-- One row per window, the most uneven partition load first (max_mean: the
-- heaviest partition's events over the mean; gini: 0 even, towards 1 all on
-- one partition), then the Redis Cluster node view and the share of the
-- heaviest key and ten keys. partial = 1 when the merger gave up waiting
-- for the partitions named in missing.
SELECT
    start_ms,
    end_ms,
    events,
    max_mean,
    gini,
    node_max_mean,
    node_gini,
    top1_share,
    top10_share,
    distinct_keys,
    late,
    partial,
    missing
FROM reports FINAL
WHERE start >= {from:DateTime} AND start < {to:DateTime}
  AND scope = if({app:String} = '', 'cluster', 'app')
  AND app = {app:String}
ORDER BY max_mean DESC, start_ms
LIMIT {limit:UInt32}
