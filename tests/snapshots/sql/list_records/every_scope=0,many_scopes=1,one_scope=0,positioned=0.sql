-- $1 scopes, $2 as_of, $3 max_rank, $4 valid_at, $5 include_retracted, $6 include_contested, $7 include_proposed, $8 types, $9 tags, $10 salience_floor, $11 now, $12 min_salience, $13 statuses, $14 ranks, $15 entity, $16 subjects, $17 predicates, $18 created_after, $19 created_before, $20 occurred_after, $21 occurred_before, $22 valid_after, $23 valid_before, $24 rows, $25 max_bytes, $26 limit, $27 all_scopes
WITH RECURSIVE listed(scope) AS (
    SELECT unnest($1::text[])
), page AS (
    SELECT k.id, k.created_at, k.status_as_of, k.bytes
      FROM listed s CROSS JOIN LATERAL (
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until) AS status_as_of,
           CASE WHEN r.sensitivity_rank > $3 THEN 256 ELSE r.projected_bytes END AS bytes
      FROM memory_records r
     WHERE r.scope = s.scope
       
       AND r.sensitivity_rank <= $3 + 1
AND ($2::timestamptz IS NULL OR r.recorded_at <= $2::timestamptz)
AND ($4::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $4::timestamptz)
         AND (r.valid_to IS NULL OR $4::timestamptz < r.valid_to)))
AND ($5
     OR status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until) <> 'retracted')
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until) <> 'proposed')
AND ($8::text[] IS NULL OR r.type = ANY($8::text[]))
AND ($9::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($9::text[])))
AND (NOT $10 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $11) >= $12)
       AND ($13::text[] IS NULL
            OR status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until)
               = ANY($13::text[]))
       AND ($14::int[] IS NULL OR r.sensitivity_rank = ANY($14::int[]))
       AND ($15::uuid IS NULL
            OR EXISTS (SELECT 1 FROM relations l WHERE l.source_id = r.id AND l.target_id = $15::uuid)
            OR EXISTS (SELECT 1 FROM relations l WHERE l.target_id = r.id AND l.source_id = $15::uuid))
       AND ($16::text[] IS NULL OR r.fact_subject = ANY($16::text[]))
       AND ($17::text[] IS NULL OR r.fact_predicate = ANY($17::text[]))
       AND ($18::timestamptz IS NULL OR r.created_at >= $18::timestamptz)
       AND ($19::timestamptz IS NULL OR r.created_at < $19::timestamptz)
       AND ($20::timestamptz IS NULL OR r.occurred_at >= $20::timestamptz)
       AND ($21::timestamptz IS NULL OR r.occurred_at < $21::timestamptz)
       AND ($22::timestamptz IS NULL OR r.valid_to IS NULL OR r.valid_to > $22::timestamptz)
       AND ($23::timestamptz IS NULL
            OR r.valid_from IS NULL OR r.valid_from < $23::timestamptz)
     ORDER BY r.created_at DESC, r.id DESC
     LIMIT $24) k
     ORDER BY k.created_at DESC, k.id DESC
     LIMIT $24
), bounded AS (
    SELECT p.*, row_number() OVER w AS ord, sum(p.bytes) OVER w AS running
      FROM page p
    WINDOW w AS (ORDER BY p.created_at DESC, p.id DESC)
)
SELECT b.ord, b.bytes, b.running, (b.running <= $25 AND b.ord <= $26) AS fits,
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
                 AND ($2::timestamptz IS NULL OR s.added_at IS NULL
                      OR s.added_at <= $2::timestamptz)
               ORDER BY s.id)) AS provenance,
       to_jsonb(ARRAY(SELECT jsonb_build_object('predicate', l.predicate, 'target_id', l.target_id,
                                         'weight', l.weight, 'target_scope', x.scope,
                                         'target_sensitivity', x.sensitivity)
                 FROM relations l JOIN memory_records x ON x.id = l.target_id
                WHERE l.source_id = r.id
                  AND ($27 OR x.scope = ANY($1::text[]))
                  AND x.sensitivity_rank <= $3
                  AND ($2::timestamptz IS NULL OR l.created_at <= $2::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id)) AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= $25 AND b.ord <= $26
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord
