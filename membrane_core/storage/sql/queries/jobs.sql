-- name: maint_decay_refresh
-- Refresh the salience checkpoint of due records from the closed form, never compounding, in the narrow row of salience_checkpoints (RFC 6.1); the record rows are share-locked so a concurrent reinforcement is waited for and read, never their row rewritten.
WITH r AS (
    SELECT r.id, current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                  r.min_salience, r.pinned, %(now)s) AS salience,
           r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
           r.max_age_seconds, r.created_at, r.pinned,
           (r.deletion_policy = 'auto_prune' AND r.status = 'active') AS prunable
      FROM unnest(%(ids)s::uuid[]) AS u(id) JOIN memory_records r ON r.id = u.id
       FOR SHARE OF r
), kept AS (
    INSERT INTO salience_checkpoints (record_id, salience, base_salience, reinforced_at)
    SELECT id, salience, base_salience, reinforced_at FROM r ORDER BY id
    ON CONFLICT (record_id) DO UPDATE
       SET salience = EXCLUDED.salience, base_salience = EXCLUDED.base_salience,
           reinforced_at = EXCLUDED.reinforced_at
)
SELECT id, salience, base_salience, reinforced_at, half_life_seconds, min_salience,
       max_age_seconds, created_at, pinned, prunable
  FROM r

-- name: maint_prune
-- Delete eligible candidates, re-checked under the row lock, each with a delete audit entry (RFC 6.3).
WITH gone AS (
    DELETE FROM memory_records r
     USING unnest(%(ids)s::uuid[]) AS u(id)
     WHERE r.id = u.id
       AND NOT r.pinned AND r.deletion_policy = 'auto_prune' AND r.status = 'active'
       AND (current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                             false, %(now)s) <= greatest(r.min_salience, %(epsilon)s)
            OR (r.max_age_seconds IS NOT NULL
                AND r.created_at + make_interval(secs => r.max_age_seconds) <= %(now)s))
    RETURNING r.id, r.scope, r.sensitivity, r.type, r.created_at, r.max_age_seconds,
              current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                               r.min_salience, false, %(now)s) AS salience_now
), logged AS (
    INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details)
    SELECT g.id, g.scope, g.sensitivity, 'delete', %(actor)s, %(now)s,
           CASE WHEN g.max_age_seconds IS NOT NULL
                     AND g.created_at + make_interval(secs => g.max_age_seconds) <= %(now)s
                THEN 'pruned: maximum age passed'
                ELSE 'pruned: salience reached floor' END,
           jsonb_build_object('type', g.type, 'salience', g.salience_now, 'job', 'prune')
      FROM gone g
     ORDER BY g.id
), cleared AS (
    DELETE FROM work_items w USING gone g
     WHERE w.kind = ANY(ARRAY['embed','extract','consolidate','compress','decay','seal'])
       AND w.target_id = g.id
)
SELECT id FROM gone

-- name: maint_compress
-- Compress old episodic records: base salience lowered by a factor, not below the floor, clock kept (RFC 6.4.1).
WITH done AS (
    UPDATE memory_records r
       SET base_salience = greatest(least(r.base_salience, r.min_salience),
                                    r.base_salience * %(factor)s),
           salience = current_salience(greatest(least(r.base_salience, r.min_salience),
                                                r.base_salience * %(factor)s),
                                       r.reinforced_at, r.half_life_seconds, r.min_salience,
                                       r.pinned, %(now)s),
           updated_at = %(now)s
      FROM (SELECT m.id, m.base_salience AS old_base
              FROM unnest(%(ids)s::uuid[]) AS u(id) JOIN memory_records m ON m.id = u.id) o
     WHERE r.id = o.id AND r.type = 'episodic' AND NOT r.pinned
       AND r.created_at <= %(now)s - make_interval(secs => %(age_seconds)s)
       AND NOT EXISTS (SELECT 1 FROM audit_log a
                        WHERE a.record_id = r.id AND a.action = 'decay'
                          AND a.details ? 'compressed_from')
    RETURNING r.id, r.scope, r.sensitivity, r.base_salience, o.old_base AS previous_base
), logged AS (
    INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details)
    SELECT d.id, d.scope, d.sensitivity, 'decay', %(actor)s, %(now)s, 'episodic compression',
           jsonb_build_object('compressed_from', d.previous_base, 'base_salience', d.base_salience)
      FROM done d
     ORDER BY d.id
)
SELECT id FROM done

-- name: maint_lock_sources
-- Re-read source records under a share lock inside the deriving transaction (RFC 7.4).
SELECT r.id, r.type, r.scope, r.sensitivity, r.sensitivity_rank, r.status, r.confidence,
       r.summary, p.body AS payload, p.sealed,
       coalesce((SELECT jsonb_agg(jsonb_build_object('kind', s.kind, 'ref', s.ref) ORDER BY s.id)
                   FROM provenance_sources s WHERE s.record_id = r.id), '[]') AS provenance
  FROM memory_records r
  JOIN record_payloads p ON p.record_id = r.id
 WHERE r.id = ANY(%(ids)s::uuid[])
 ORDER BY r.id
   FOR SHARE OF r

-- name: maint_new_sources
-- The (record, source) pairs not yet linked by derived_from: each source reinforces once (RFC 6.2).
SELECT u.rid, u.src
  FROM unnest(%(records)s::uuid[], %(sources)s::uuid[]) AS u(rid, src)
 WHERE NOT EXISTS (SELECT 1 FROM relations l
                    WHERE l.source_id = u.rid AND l.predicate = 'derived_from'
                      AND l.target_id = u.src)

-- name: maint_reinforce
-- Reinforce active derived records by gain x new sources and raise their sensitivity to the sources' maximum (RFC 6.2, 7.4).
UPDATE memory_records r
   SET base_salience = greatest(c.cur, least(1.0, c.cur + r.reinforcement_gain * c.n)),
       salience = greatest(c.cur, least(1.0, c.cur + r.reinforcement_gain * c.n)),
       reinforced_at = CASE WHEN c.n > 0 THEN %(now)s ELSE r.reinforced_at END,
       sensitivity = CASE WHEN c.rank > r.sensitivity_rank
                          THEN (ARRAY['public','low','medium','high','hyper'])[c.rank + 1]
                          ELSE r.sensitivity END,
       updated_at = %(now)s
  FROM (SELECT m.id, u.n, u.rank,
               current_salience(m.base_salience, m.reinforced_at, m.half_life_seconds,
                                m.min_salience, m.pinned, %(now)s) AS cur
          FROM unnest(%(ids)s::uuid[], %(counts)s::int[], %(ranks)s::int[]) AS u(id, n, rank)
          JOIN memory_records m ON m.id = u.id
         ORDER BY m.id) c
 WHERE r.id = c.id AND r.status = 'active'
RETURNING r.id, r.scope, r.sensitivity

-- name: maint_add_relations
-- Link derived records to their sources; an existing edge is kept as is.
INSERT INTO relations (source_id, predicate, target_id, created_at)
SELECT u.s, 'derived_from', u.t, %(now)s
  FROM unnest(%(sources)s::uuid[], %(targets)s::uuid[]) AS u(s, t)
  JOIN memory_records m ON m.id = u.t
ON CONFLICT DO NOTHING

-- name: maint_upsert_signatures
-- Count successful and failed episodes per scope and tool signature, incrementally (RFC 6.4.3).
INSERT INTO tool_signatures AS s (scope, signature_key, signature, success_count, failure_count,
                                  sensitivity_rank, pending_sources, updated_at)
SELECT u.scope, u.key, u.signature, u.successes, u.failures, u.rank, u.sources, %(now)s
  FROM jsonb_to_recordset(%(rows)s::jsonb)
       AS u(scope text, key text, signature text[], successes int, failures int, rank int,
            sources uuid[])
 ORDER BY u.scope, u.key
ON CONFLICT (scope, signature_key) DO UPDATE
   SET success_count = s.success_count + EXCLUDED.success_count,
       failure_count = s.failure_count + EXCLUDED.failure_count,
       sensitivity_rank = greatest(s.sensitivity_rank, EXCLUDED.sensitivity_rank),
       pending_sources = CASE WHEN s.competence_id IS NULL
                              THEN (s.pending_sources || EXCLUDED.pending_sources)[1:16]
                              ELSE s.pending_sources END,
       updated_at = EXCLUDED.updated_at
RETURNING s.scope, s.signature_key, s.signature, s.success_count, s.failure_count,
          s.sensitivity_rank, s.pending_sources, s.competence_id, s.plan_id

-- name: maint_link_signatures
-- Remember the competence and plan-graph records mined from each signature (RFC 6.4.3).
UPDATE tool_signatures s
   SET competence_id = coalesce(s.competence_id, u.competence_id),
       plan_id = coalesce(s.plan_id, u.plan_id),
       pending_sources = CASE WHEN u.competence_id IS NOT NULL THEN '{}' ELSE s.pending_sources END
  FROM unnest(%(scopes)s::text[], %(keys)s::text[], %(competence_ids)s::uuid[], %(plan_ids)s::uuid[])
       AS u(scope, key, competence_id, plan_id)
 WHERE s.scope = u.scope AND s.signature_key = u.key

-- name: maint_update_procedural
-- Write success statistics into competence and plan-graph payloads from the signature counts (RFC 4.4); a sealed payload is left as it is (RFC 7.6).
UPDATE record_payloads p
   SET body = CASE p.kind
       WHEN 'competence' THEN jsonb_set(p.body, '{performance}',
            coalesce(p.body -> 'performance', '{}'::jsonb)
            || jsonb_build_object('success_count', u.successes, 'failure_count', u.failures,
                                  'last_used_at', %(now)s::timestamptz))
       ELSE jsonb_set(p.body, '{metrics}',
            coalesce(p.body -> 'metrics', '{}'::jsonb)
            || jsonb_build_object('execution_count', u.successes + u.failures,
                                  'failure_rate', u.failures::float8 / greatest(1, u.successes + u.failures),
                                  'last_executed_at', %(now)s::timestamptz))
       END
  FROM unnest(%(ids)s::uuid[], %(successes)s::int[], %(failures)s::int[]) AS u(id, successes, failures)
  JOIN memory_records m ON m.id = u.id
 WHERE p.record_id = u.id AND p.kind IN ('competence', 'plan_graph') AND m.status <> 'retracted'
   AND p.body IS NOT NULL
