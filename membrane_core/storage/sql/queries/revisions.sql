-- name: revision_fact_keys
-- Normalised fact keys of semantic records (blind when sealed, RFC 7.6) with their levels, read before any row lock so advisory key locks come first (RFC 5.4).
SELECT id, scope, fact_subject, fact_predicate, fact_object, sensitivity_rank
  FROM memory_records
 WHERE id = ANY(%(ids)s::uuid[]) AND type = 'semantic'

-- name: revision_lock_targets
-- Re-read and lock revision targets in id order; NO KEY UPDATE still admits FK key-share locks (RFC 5.2).
SELECT id, type, scope, sensitivity, status, confidence, base_salience, reinforced_at,
       half_life_seconds, min_salience, pinned, fact_subject, fact_predicate, fact_object
  FROM memory_records
 WHERE id = ANY(%(ids)s::uuid[])
 ORDER BY id
   FOR NO KEY UPDATE

-- name: revision_visible_access
-- Scope and sensitivity of records a revision wants to link to, for the caller's visibility check (RFC 5.2.5).
SELECT id, scope, sensitivity FROM memory_records WHERE id = ANY(%(ids)s::uuid[])

-- name: revision_retracted_by
-- The revision that retracted a record: its latest retracting audit entry's operation, successor, actor and time (RFC 5.2).
SELECT details ->> 'operation' AS operation,
       coalesce(details ->> 'superseded_by', details ->> 'merged_into') AS successor, actor, ts AS at
  FROM audit_log
 WHERE record_id = %(id)s AND details ->> 'operation' IN ('supersede', 'merge', 'retract')
 ORDER BY id DESC
 LIMIT 1

-- name: revision_mark_retracted
-- Retract records: status and transaction-time end; salience is left alone (RFC 5.3, 5.6).
UPDATE memory_records
   SET status = 'retracted', retracted_at = %(now)s, updated_at = %(now)s
 WHERE id = ANY(%(ids)s::uuid[])

-- name: revision_has_relation
-- Whether a relation exists already (a repeated contest links its records once: RFC 5.2.5).
SELECT EXISTS (SELECT 1 FROM relations
                WHERE source_id = %(source)s AND predicate = %(predicate)s AND target_id = %(target)s)

-- name: revision_mark_contested
-- Contest a record; contested_at keeps the first contest time (RFC 5.2.5, 5.6).
UPDATE memory_records
   SET status = 'contested', contested_at = coalesce(contested_at, %(now)s), updated_at = %(now)s
 WHERE id = %(id)s

-- name: revision_set_superseded_by
-- Point a superseded record's payload at its replacement (RFC 5.2.1); a sealed payload is sealed again instead (revision_set_sealed, RFC 7.6).
UPDATE record_payloads
   SET body = jsonb_set(body, '{superseded_by}', to_jsonb(%(new_id)s::text))
 WHERE record_id = %(id)s AND body IS NOT NULL

-- name: revision_set_sealed
-- A sealed record's new ciphertext, under the key it names (RFC 7.6).
UPDATE record_payloads SET key_id = %(key_id)s, sealed = %(sealed)s
 WHERE record_id = %(id)s AND sealed IS NOT NULL

-- name: revision_set_salience
-- New base salience with the decay clock restarted (RFC 5.2.6, 5.2.7, 6.2).
UPDATE memory_records
   SET base_salience = %(base)s, salience = %(base)s, reinforced_at = %(now)s, updated_at = %(now)s
 WHERE id = %(id)s

-- name: revision_reschedule_decay
-- Move a record's decay checkpoint after its clock restarted, no later than its maximum age (LEAST skips a NULL), unless a worker holds the item (RFC 6.1, 9.3).
INSERT INTO work_items (kind, target_id, due_at)
SELECT 'decay', r.id, least(%(due)s::timestamptz, r.created_at + make_interval(secs => r.max_age_seconds))
  FROM memory_records r
 WHERE r.id = %(id)s
ON CONFLICT (kind, target_id) DO UPDATE
   SET due_at = EXCLUDED.due_at, dead = false, attempts = 0, last_error = NULL
 WHERE work_items.claimed_by IS NULL OR work_items.claim_expires_at < %(now)s

-- name: revision_insert_tombstones
-- Record retracted fact keys with who and why, each at its record's level; an existing tombstone of the key and level keeps its first author (RFC 5.4).
INSERT INTO fact_tombstones (scope, subject, predicate, object, record_id, actor, rationale,
                             created_at, sensitivity_rank)
SELECT * FROM unnest(%(scopes)s::text[], %(subjects)s::text[], %(predicates)s::text[],
                     %(objects)s::text[], %(record_ids)s::uuid[], %(actors)s::text[],
                     %(rationales)s::text[], %(created)s::timestamptz[], %(ranks)s::smallint[])
ON CONFLICT (scope, subject, predicate, object, sensitivity_rank) DO NOTHING

-- name: revision_clear_tombstones
-- An explicit revision re-asserts tombstoned keys at its record's level: remove the tombstones that bind that level (its own, and those of every level) and return what they said (RFC 5.4).
DELETE FROM fact_tombstones t
 USING unnest(%(scopes)s::text[], %(subjects)s::text[], %(predicates)s::text[],
              %(objects)s::text[], %(ranks)s::smallint[]) AS k(s, su, pr, ob, rk)
 WHERE t.scope = k.s AND t.subject = k.su AND t.predicate = k.pr AND t.object = k.ob
   AND t.sensitivity_rank IN (-1, k.rk)
RETURNING t.scope, t.subject, t.predicate, t.object, t.record_id, t.actor, t.rationale, t.created_at
