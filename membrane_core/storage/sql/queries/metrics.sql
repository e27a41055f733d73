-- name: metrics_records
-- Totals over the records the caller may read; averages and shares over the unretracted (RFC 14.2).
SELECT count(*) AS total_records,
       count(*) FILTER (WHERE r.status <> 'retracted') AS live_records,
       count(*) FILTER (WHERE r.status = 'active') AS active_records,
       count(*) FILTER (WHERE r.pinned AND r.status <> 'retracted') AS pinned_records,
       avg(current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                            r.pinned, %(now)s)) FILTER (WHERE r.status <> 'retracted') AS avg_salience,
       avg(r.confidence) FILTER (WHERE r.status <> 'retracted') AS avg_confidence,
       count(*) FILTER (WHERE r.status <> 'active') AS revised_records,
       count(*) FILTER (WHERE r.status <> 'retracted' AND r.reinforced_at > r.created_at)
           AS reinforced_records,
       count(*) FILTER (WHERE r.status <> 'retracted'
                          AND r.created_at > %(now)s - interval '24 hours') AS created_24h
  FROM memory_records r
 WHERE (%(all_scopes)s OR r.scope = ANY(%(scopes)s::text[]))
   AND r.sensitivity_rank <= %(max_rank)s

-- name: metrics_by_type_status
-- Record counts by type and status over the records the caller may read (RFC 14.2).
SELECT r.type, r.status, count(*) AS n
  FROM memory_records r
 WHERE (%(all_scopes)s OR r.scope = ANY(%(scopes)s::text[]))
   AND r.sensitivity_rank <= %(max_rank)s
 GROUP BY r.type, r.status

-- name: metrics_procedural
-- Competence success counts and plan-graph executions over readable, unretracted records (RFC 14.2).
SELECT coalesce(sum((p.body #>> '{performance,success_count}')::bigint)
                    FILTER (WHERE r.type = 'competence'), 0) AS successes,
       coalesce(sum((p.body #>> '{performance,failure_count}')::bigint)
                    FILTER (WHERE r.type = 'competence'), 0) AS failures,
       avg((p.body #>> '{metrics,execution_count}')::float8)
           FILTER (WHERE r.type = 'plan_graph') AS plan_executions
  FROM memory_records r
  JOIN record_payloads p ON p.record_id = r.id
 WHERE r.type IN ('competence', 'plan_graph') AND r.status <> 'retracted'
   AND (%(all_scopes)s OR r.scope = ANY(%(scopes)s::text[]))
   AND r.sensitivity_rank <= %(max_rank)s

-- name: metrics_audit
-- Audit entries of the records whose history the caller may read in full, by the scope and sensitivity stored with each record's latest entry, as the audit read checks them (RFC 5.5.1, 14.2).
SELECT coalesce(sum(g.n), 0)::bigint
  FROM (SELECT count(*) AS n, max(a.id) AS last FROM audit_log a GROUP BY a.record_id) g
  JOIN audit_log l ON l.id = g.last
 WHERE (%(all_scopes)s OR l.scope = ANY(%(scopes)s::text[]))
   AND array_position(ARRAY['public','low','medium','high','hyper'], l.sensitivity) - 1
       <= %(max_rank)s

-- name: metrics_operations
-- Operations inbox depth by kind and status (RFC 14.2).
SELECT kind, status, count(*) AS n FROM operations GROUP BY kind, status ORDER BY kind, status

-- name: metrics_deployment
-- The deployment gauges of a scrape, reading only pending rows through the queues' partial indexes (RFC 14.2).
-- One row per sample: the inbox depth by kind and status (operations_pending holds every
-- queued or running operation, so finished ones are not read); the due work items and
-- the oldest due time of each kind (work_items_due, walked per kind up to now, so items
-- scheduled later, a decay checkpoint per record, are not read); and the embedding lag,
-- from the oldest live embed item.
SELECT 'inbox_operations' AS gauge, o.kind, o.status, count(*)::float8 AS value
  FROM operations o
 WHERE o.status IN ('queued', 'running')
 GROUP BY o.kind, o.status
UNION ALL
SELECT g.gauge, k.kind, NULL, g.value
  FROM unnest(%(work_kinds)s::text[]) AS k(kind)
 CROSS JOIN LATERAL (SELECT count(*) AS n, min(w.due_at) AS oldest
                       FROM work_items w
                      WHERE w.kind = k.kind AND NOT w.dead AND w.due_at <= %(now)s) d
 CROSS JOIN LATERAL (VALUES ('work_due_items', d.n::float8),
                            ('work_oldest_due_seconds',
                             coalesce(extract(epoch FROM %(now)s - d.oldest), 0)::float8)) AS g(gauge, value)
UNION ALL
SELECT 'embedding_lag_seconds', 'embed', NULL,
       coalesce(extract(epoch FROM %(now)s - min(w.created_at)), 0)::float8
  FROM work_items w
 WHERE w.kind = 'embed' AND NOT w.dead
