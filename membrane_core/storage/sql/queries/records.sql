-- name: copy_records
-- Bulk insert of memory_records rows (RFC 3.3).
COPY memory_records (id, type, scope, sensitivity, confidence, salience, status, decay_curve,
    half_life_seconds, min_salience, max_age_seconds, reinforcement_gain, base_salience,
    reinforced_at, pinned, deletion_policy, validity_mode, valid_from, valid_to, recorded_at,
    occurred_at, created_at, updated_at, summary, metadata, fact_subject, fact_predicate,
    fact_object, projected_bytes, search_text) FROM STDIN (FORMAT BINARY)

-- name: copy_payloads
-- Bulk insert of record payloads.
COPY record_payloads (record_id, kind, body, key_id, sealed) FROM STDIN (FORMAT BINARY)

-- name: copy_tags
-- Bulk insert of record tags.
COPY record_tags (record_id, tag) FROM STDIN (FORMAT BINARY)

-- name: copy_provenance
-- Bulk insert of provenance sources.
COPY provenance_sources (record_id, kind, ref, hash, created_by, ts, added_at) FROM STDIN (FORMAT BINARY)

-- name: copy_relations
-- Bulk insert of relations.
COPY relations (source_id, predicate, target_id, weight, created_at) FROM STDIN (FORMAT BINARY)

-- name: copy_audit
-- Bulk append to the audit log; the trigger chains each entry (RFC 5.5).
COPY audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details) FROM STDIN (FORMAT BINARY)

-- name: copy_work_items
-- Bulk insert of work items for records created in the same transaction (RFC 9.3).
COPY work_items (kind, target_id, due_at) FROM STDIN (FORMAT BINARY)

-- name: insert_work_items
-- Schedule work items; an existing item of the same kind and target keeps the earlier due time (RFC 9.3).
INSERT INTO work_items (kind, target_id, due_at)
SELECT * FROM unnest(%(kinds)s::text[], %(targets)s::uuid[], %(due)s::timestamptz[])
ON CONFLICT (kind, target_id) DO UPDATE SET due_at = least(work_items.due_at, EXCLUDED.due_at),
    dead = false

-- name: lock_fact_keys
-- Serialise every writer of the same scope/subject/predicate/object (RFC 5.4).
SELECT pg_advisory_xact_lock(k) FROM (
    SELECT DISTINCT hashtextextended(s || chr(31) || su || chr(31) || pr || chr(31) || ob, 7214)
           AS k
    FROM unnest(%(scopes)s::text[], %(subjects)s::text[], %(predicates)s::text[],
                %(objects)s::text[]) AS f(s, su, pr, ob)
    ORDER BY 1) keys

-- name: match_facts
-- Per candidate key: blocked (tombstone, erased key (RFC 15.4), or a retracted fact with no live one) and the live fact, active first, then contested, then proposed (RFC 5.4, 5.7); a key with a level (rk, a capture's sensitivity rank) matches only live facts and retractions at that level, and tombstones of that level or of every level (RFC 3.4); without one (NULL), every level.
SELECT f.i,
       (EXISTS (SELECT 1 FROM fact_tombstones t
                 WHERE t.scope = f.s AND t.subject = f.su AND t.predicate = f.pr AND t.object = f.ob
                   AND (f.rk IS NULL OR t.sensitivity_rank IN (-1, f.rk)))
        OR EXISTS (SELECT 1 FROM erased_facts e
                    WHERE e.scope = f.s AND e.key_digest = fact_key_digest(f.su, f.pr, f.ob))
        OR (live.id IS NULL AND EXISTS (
                SELECT 1 FROM memory_records r
                 WHERE r.type = 'semantic' AND r.scope = f.s AND r.fact_subject = f.su
                   AND r.fact_predicate = f.pr AND r.fact_object = f.ob
                   AND r.status = 'retracted' AND (f.rk IS NULL OR r.sensitivity_rank = f.rk)))) AS blocked,
       live.id AS live_id, live.status AS live_status
  FROM unnest(%(idx)s::int[], %(scopes)s::text[], %(subjects)s::text[], %(predicates)s::text[],
              %(objects)s::text[], %(levels)s::int[]) AS f(i, s, su, pr, ob, rk)
  LEFT JOIN LATERAL (
        SELECT r.id, r.status FROM memory_records r
         WHERE r.type = 'semantic' AND r.scope = f.s AND r.fact_subject = f.su
           AND r.fact_predicate = f.pr AND r.fact_object = f.ob AND r.status <> 'retracted'
           AND (f.rk IS NULL OR r.sensitivity_rank = f.rk)
         ORDER BY (r.status = 'active') DESC, (r.status = 'contested') DESC, r.created_at LIMIT 1) live ON true

-- name: reinforce_facts
-- Reinforce facts by gain x new sources from the closed-form salience, clock restarted (RFC 6.2); sensitivity rises to the sources' maximum (RFC 7.4).
UPDATE memory_records r
   SET base_salience = greatest(c.cur, least(1.0, c.cur + r.reinforcement_gain * c.n)),
       salience = greatest(c.cur, least(1.0, c.cur + r.reinforcement_gain * c.n)),
       sensitivity = CASE WHEN c.src_rank > r.sensitivity_rank
                          THEN (ARRAY['public','low','medium','high','hyper'])[c.src_rank + 1]
                          ELSE r.sensitivity END,
       reinforced_at = %(now)s,
       updated_at = %(now)s
  FROM (SELECT m.id, u.n, u.src_rank, current_salience(m.base_salience, m.reinforced_at,
                 m.half_life_seconds, m.min_salience, m.pinned, %(now)s) AS cur
          FROM unnest(%(ids)s::uuid[], %(counts)s::int[], %(ranks)s::int[]) AS u(id, n, src_rank)
          JOIN memory_records m ON m.id = u.id) c
 WHERE r.id = c.id
RETURNING r.id, r.scope, r.sensitivity

-- name: hydrate_records
-- Full records by id, with payload, tags, provenance and outgoing relations (made by as_of, when given: RFC 2.1, 5.6).
SELECT /*@record_fields*/,
       to_jsonb(ARRAY(SELECT jsonb_build_object('predicate', l.predicate,
                                                'target_id', l.target_id, 'weight', l.weight)
                        FROM relations l WHERE l.source_id = r.id
                         AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
                       ORDER BY l.created_at, l.predicate, l.target_id)) AS relations
  FROM memory_records r
  JOIN record_payloads p ON p.record_id = r.id
 WHERE r.id = ANY(%(ids)s::uuid[])

-- name: record_fields
-- Fragment (/*@record_fields*/): a record's columns, payload (p), tags and provenance (the sources added by as_of, when the read has one: RFC 5.6), as records.row_to_record reads them (RFC 2.1); a sealed record's ciphertext (its payload, summary, metadata and tags, RFC 7.6). The provenance is JSON in the view's form already (its fields in the model's order, each time as UTC with `Z`, microseconds only when it has some), so a view passes it on as it is (RFC 10.7). Lists are ARRAY subqueries rather than ordered aggregates: the tags come in the primary key's order, with no sort, and no aggregate state is set up for each row (RFC 8.3).
r.id, r.type, r.scope, r.sensitivity, r.confidence, /*@stored_salience(r)*/ AS salience, r.status,
r.decay_curve, r.half_life_seconds, r.min_salience, r.max_age_seconds,
r.reinforcement_gain, r.base_salience, r.reinforced_at, r.pinned, r.deletion_policy,
r.validity_mode, r.valid_from, r.valid_to, r.recorded_at, r.retracted_at,
r.occurred_at, r.created_at, r.updated_at, r.summary, r.metadata, p.body AS payload, p.sealed,
ARRAY(SELECT t.tag FROM record_tags t WHERE t.record_id = r.id ORDER BY t.tag) AS tags,
to_json(ARRAY(SELECT json_build_object('kind', s.kind, 'ref', s.ref, 'hash', s.hash, 'created_by', s.created_by,
                                       'timestamp', to_char(s.ts AT TIME ZONE 'UTC',
                                           CASE WHEN date_trunc('second', s.ts) = s.ts
                                                THEN 'YYYY-MM-DD"T"HH24:MI:SS"Z"'
                                                ELSE 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"' END))
                FROM provenance_sources s WHERE s.record_id = r.id
                 AND (%(as_of)s::timestamptz IS NULL OR s.added_at IS NULL
                      OR s.added_at <= %(as_of)s::timestamptz)
               ORDER BY s.id)) AS provenance

-- name: stored_salience
-- Fragment (/*@stored_salience(<record alias>)*/): a record's stored salience (RFC 6.1): its decay checkpoint while that was computed from the record's base salience and clock, else what the record's last write set.
coalesce((SELECT c.salience FROM salience_checkpoints c
           WHERE c.record_id = /*=*/.id AND c.base_salience = /*=*/.base_salience
             AND c.reinforced_at = /*=*/.reinforced_at), /*=*/.salience)
