-- $1 ids, $2 limit, $3 max_rank, $4 max_bytes, $5 as_of, $6 all_scopes, $7 scopes
WITH wanted AS (
    SELECT u.id, u.ord FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, ord)
     WHERE u.ord <= $2
), sized AS (
    SELECT w.id, w.ord,
           CASE WHEN r.sensitivity_rank > $3 THEN 256 ELSE r.projected_bytes END AS bytes
      FROM wanted w JOIN memory_records r ON r.id = w.id
), bounded AS (
    SELECT id, ord, bytes, sum(bytes) OVER (ORDER BY ord) AS running FROM sized
)
SELECT b.ord, b.bytes, b.running, (b.running <= $4) AS fits,
       r.id, r.type, r.scope, r.sensitivity, r.confidence, coalesce((SELECT c.salience FROM salience_checkpoints c
           WHERE c.record_id = r.id AND c.base_salience = r.base_salience
             AND c.reinforced_at = r.reinforced_at), r.salience) AS salience, r.status,
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
                 AND ($5::timestamptz IS NULL OR s.added_at IS NULL
                      OR s.added_at <= $5::timestamptz)
               ORDER BY s.id)) AS provenance,
       to_jsonb(ARRAY(SELECT jsonb_build_object('predicate', l.predicate, 'target_id', l.target_id,
                                         'weight', l.weight, 'target_scope', x.scope,
                                         'target_sensitivity', x.sensitivity)
                 FROM relations l JOIN memory_records x ON x.id = l.target_id
                WHERE l.source_id = r.id
                  AND ($6 OR x.scope = ANY($7::text[]))
                  AND x.sensitivity_rank <= $3
                  AND ($5::timestamptz IS NULL OR l.created_at <= $5::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id)) AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= $4
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord
