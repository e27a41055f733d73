-- $1 as_of, $2 max_rank, $3 valid_at, $4 include_retracted, $5 include_contested, $6 include_proposed, $7 types, $8 tags, $9 salience_floor, $10 now, $11 min_salience, $12 statuses, $13 ranks, $14 entity, $15 subjects, $16 predicates, $17 created_after, $18 created_before, $19 occurred_after, $20 occurred_before, $21 valid_after, $22 valid_before, $23 rows, $24 max_bytes, $25 limit, $26 all_scopes, $27 scopes
WITH RECURSIVE listed(scope) AS (
    (SELECT m.scope FROM memory_records m ORDER BY m.scope LIMIT 1)
    UNION ALL
    SELECT (SELECT m.scope FROM memory_records m WHERE m.scope > l.scope ORDER BY m.scope LIMIT 1)
      FROM listed l WHERE l.scope IS NOT NULL
), page AS (
    SELECT k.id, k.created_at, k.status_as_of, k.bytes
      FROM listed s CROSS JOIN LATERAL (
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until) AS status_as_of,
           CASE WHEN r.sensitivity_rank > $2 THEN 256 ELSE r.projected_bytes END AS bytes
      FROM memory_records r
     WHERE r.scope = s.scope
       
       AND r.sensitivity_rank <= $2 + 1
AND ($1::timestamptz IS NULL OR r.recorded_at <= $1::timestamptz)
AND ($3::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $3::timestamptz)
         AND (r.valid_to IS NULL OR $3::timestamptz < r.valid_to)))
AND ($4
     OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until) <> 'retracted')
AND ($5
     OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until) <> 'contested')
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until) <> 'proposed')
AND ($7::text[] IS NULL OR r.type = ANY($7::text[]))
AND ($8::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($8::text[])))
AND (NOT $9 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $10) >= $11)
       AND ($12::text[] IS NULL
            OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until)
               = ANY($12::text[]))
       AND ($13::int[] IS NULL OR r.sensitivity_rank = ANY($13::int[]))
       AND ($14::uuid IS NULL
            OR EXISTS (SELECT 1 FROM relations l WHERE l.source_id = r.id AND l.target_id = $14::uuid)
            OR EXISTS (SELECT 1 FROM relations l WHERE l.target_id = r.id AND l.source_id = $14::uuid))
       AND ($15::text[] IS NULL OR r.fact_subject = ANY($15::text[]))
       AND ($16::text[] IS NULL OR r.fact_predicate = ANY($16::text[]))
       AND ($17::timestamptz IS NULL OR r.created_at >= $17::timestamptz)
       AND ($18::timestamptz IS NULL OR r.created_at < $18::timestamptz)
       AND ($19::timestamptz IS NULL OR r.occurred_at >= $19::timestamptz)
       AND ($20::timestamptz IS NULL OR r.occurred_at < $20::timestamptz)
       AND ($21::timestamptz IS NULL OR r.valid_to IS NULL OR r.valid_to > $21::timestamptz)
       AND ($22::timestamptz IS NULL
            OR r.valid_from IS NULL OR r.valid_from < $22::timestamptz)
     ORDER BY r.created_at DESC, r.id DESC
     LIMIT $23) k
     ORDER BY k.created_at DESC, k.id DESC
     LIMIT $23
), bounded AS (
    SELECT p.*, row_number() OVER w AS ord, sum(p.bytes) OVER w AS running
      FROM page p
    WINDOW w AS (ORDER BY p.created_at DESC, p.id DESC)
)
SELECT b.ord, b.bytes, b.running, (b.running <= $24 AND b.ord <= $25) AS fits,
       b.status_as_of, b.id AS listed_id, b.created_at AS listed_created_at,
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
                 AND ($1::timestamptz IS NULL OR s.added_at IS NULL
                      OR s.added_at <= $1::timestamptz)
               ORDER BY s.id)) AS provenance,
       to_jsonb(ARRAY(SELECT jsonb_build_object('predicate', l.predicate, 'target_id', l.target_id,
                                         'weight', l.weight, 'target_scope', x.scope,
                                         'target_sensitivity', x.sensitivity)
                 FROM relations l JOIN memory_records x ON x.id = l.target_id
                WHERE l.source_id = r.id
                  AND ($26 OR x.scope = ANY($27::text[]))
                  AND x.sensitivity_rank <= $2
                  AND ($1::timestamptz IS NULL OR l.created_at <= $1::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id)) AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= $24 AND b.ord <= $25
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord
