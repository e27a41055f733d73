-- $1 as_of, $2 max_rank, $3 valid_at, $4 include_retracted, $5 include_contested, $6 types, $7 tags, $8 salience_floor, $9 now, $10 min_salience, $11 statuses, $12 ranks, $13 entity, $14 subjects, $15 predicates, $16 created_after, $17 created_before, $18 occurred_after, $19 occurred_before, $20 valid_after, $21 valid_before, $22 rows, $23 max_bytes, $24 limit, $25 all_scopes, $26 scopes
WITH RECURSIVE page AS (
    SELECT k.id, k.created_at, k.status_as_of, k.bytes
      FROM listed s CROSS JOIN LATERAL (
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz) AS status_as_of,
           CASE WHEN r.sensitivity_rank > $2 THEN 256 ELSE r.projected_bytes END AS bytes
      FROM memory_records r
     WHERE r.scope = s.scope
       
       AND r.sensitivity_rank <= $2 + 1
AND ($1::timestamptz IS NULL OR r.recorded_at <= $1::timestamptz)
AND ($3::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $3::timestamptz)
         AND (r.valid_to IS NULL OR $3::timestamptz < r.valid_to)))
AND ($4
     OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz) <> 'retracted')
AND ($5
     OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz) <> 'contested')
AND ($6::text[] IS NULL OR r.type = ANY($6::text[]))
AND ($7::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($7::text[])))
AND (NOT $8 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $9) >= $10)
       AND ($11::text[] IS NULL
            OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz)
               = ANY($11::text[]))
       AND ($12::int[] IS NULL OR r.sensitivity_rank = ANY($12::int[]))
       AND ($13::uuid IS NULL
            OR EXISTS (SELECT 1 FROM relations l WHERE l.source_id = r.id AND l.target_id = $13::uuid)
            OR EXISTS (SELECT 1 FROM relations l WHERE l.target_id = r.id AND l.source_id = $13::uuid))
       AND ($14::text[] IS NULL OR r.fact_subject = ANY($14::text[]))
       AND ($15::text[] IS NULL OR r.fact_predicate = ANY($15::text[]))
       AND ($16::timestamptz IS NULL OR r.created_at >= $16::timestamptz)
       AND ($17::timestamptz IS NULL OR r.created_at < $17::timestamptz)
       AND ($18::timestamptz IS NULL OR r.occurred_at >= $18::timestamptz)
       AND ($19::timestamptz IS NULL OR r.occurred_at < $19::timestamptz)
       AND ($20::timestamptz IS NULL OR r.valid_to IS NULL OR r.valid_to > $20::timestamptz)
       AND ($21::timestamptz IS NULL
            OR r.valid_from IS NULL OR r.valid_from < $21::timestamptz)
     ORDER BY r.created_at DESC, r.id DESC
     LIMIT $22) k
     ORDER BY k.created_at DESC, k.id DESC
     LIMIT $22
), bounded AS (
    SELECT p.*, row_number() OVER w AS ord, sum(p.bytes) OVER w AS running
      FROM page p
    WINDOW w AS (ORDER BY p.created_at DESC, p.id DESC)
)
SELECT b.ord, b.bytes, b.running, (b.running <= $23 AND b.ord <= $24) AS fits,
       b.status_as_of, b.id AS listed_id, b.created_at AS listed_created_at,
       r.id, r.type, r.scope, r.sensitivity, r.confidence, r.salience, r.status,
r.decay_curve, r.half_life_seconds, r.min_salience, r.max_age_seconds,
r.reinforcement_gain, r.base_salience, r.reinforced_at, r.pinned, r.deletion_policy,
r.validity_mode, r.valid_from, r.valid_to, r.recorded_at, r.retracted_at,
r.occurred_at, r.created_at, r.updated_at, r.summary, r.metadata, p.body AS payload, p.sealed,
ARRAY(SELECT t.tag FROM record_tags t WHERE t.record_id = r.id ORDER BY t.tag) AS tags,
to_jsonb(ARRAY(SELECT jsonb_build_object('kind', s.kind, 'ref', s.ref, 'hash', s.hash,
                                         'created_by', s.created_by, 'timestamp', s.ts)
                 FROM provenance_sources s WHERE s.record_id = r.id
                  AND ($1::timestamptz IS NULL OR s.added_at IS NULL
                       OR s.added_at <= $1::timestamptz)
                ORDER BY s.id)) AS provenance,
       to_jsonb(ARRAY(SELECT jsonb_build_object('predicate', l.predicate, 'target_id', l.target_id,
                                         'weight', l.weight, 'target_scope', x.scope,
                                         'target_sensitivity', x.sensitivity)
                 FROM relations l JOIN memory_records x ON x.id = l.target_id
                WHERE l.source_id = r.id
                  AND ($25 OR x.scope = ANY($26::text[]))
                  AND x.sensitivity_rank <= $2
                  AND ($1::timestamptz IS NULL OR l.created_at <= $1::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id)) AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= $23 AND b.ord <= $24
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord
