-- The bare baseline of `membrane bench list` (RFC 10.7, 14.1).

-- name: bench_list_bare_rows
-- Baseline: one scope's newest records after a keyset position, read by the listing index as list_records_bare reads their ids, with the columns and payload a list hydrates (no filter, trust check, tags, provenance, relations or byte budget).
SELECT r.id, r.type, r.scope, r.sensitivity, r.confidence, r.salience, r.status,
       r.decay_curve, r.half_life_seconds, r.min_salience, r.max_age_seconds,
       r.reinforcement_gain, r.base_salience, r.reinforced_at, r.pinned, r.deletion_policy,
       r.validity_mode, r.valid_from, r.valid_to, r.recorded_at, r.retracted_at,
       r.occurred_at, r.created_at, r.updated_at, r.summary, r.metadata, p.body, p.sealed
  FROM memory_records r
  JOIN record_payloads p ON p.record_id = r.id
 WHERE r.scope = %(scope)s
   AND (%(after_created)s::timestamptz IS NULL
        OR (r.created_at, r.id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY r.created_at DESC, r.id DESC
 LIMIT %(limit)s

-- name: bench_list_audit
-- The create entry a capture writes (RFC 5.5) for one scope's synthetic records, which the COPY load leaves without: a record's console page reads its audit history (RFC 10.8).
INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details)
SELECT r.id, r.scope, r.sensitivity, 'create', 'bench-pipeline', r.created_at, 'captured', '{}'::jsonb
  FROM memory_records r
 WHERE r.scope = %(scope)s
 ORDER BY r.created_at, r.id

-- name: bench_list_bare_content
-- Information beside the baseline: the same rows with the content a page shows besides its columns and payload (tags, provenance, relations), as plain arrays, still without a filter, trust check or byte budget.
SELECT r.id, r.type, r.scope, r.sensitivity, r.confidence, r.salience, r.status,
       r.decay_curve, r.half_life_seconds, r.min_salience, r.max_age_seconds,
       r.reinforcement_gain, r.base_salience, r.reinforced_at, r.pinned, r.deletion_policy,
       r.validity_mode, r.valid_from, r.valid_to, r.recorded_at, r.retracted_at,
       r.occurred_at, r.created_at, r.updated_at, r.summary, r.metadata, p.body, p.sealed,
       ARRAY(SELECT t.tag FROM record_tags t WHERE t.record_id = r.id ORDER BY t.tag) AS tags,
       ARRAY(SELECT s.ref FROM provenance_sources s WHERE s.record_id = r.id ORDER BY s.id) AS provenance,
       ARRAY(SELECT l.target_id FROM relations l WHERE l.source_id = r.id
              ORDER BY l.created_at, l.predicate, l.target_id) AS relations
  FROM memory_records r
  JOIN record_payloads p ON p.record_id = r.id
 WHERE r.scope = %(scope)s
   AND (%(after_created)s::timestamptz IS NULL
        OR (r.created_at, r.id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY r.created_at DESC, r.id DESC
 LIMIT %(limit)s
