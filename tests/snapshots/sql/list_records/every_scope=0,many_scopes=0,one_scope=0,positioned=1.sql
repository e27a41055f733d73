-- $1 as_of, $2 max_rank, $3 after_created, $4 after_id, $5 valid_at, $6 include_retracted, $7 include_contested, $8 include_proposed, $9 types, $10 tags, $11 salience_floor, $12 now, $13 min_salience, $14 statuses, $15 ranks, $16 entity, $17 subjects, $18 predicates, $19 created_after, $20 created_before, $21 occurred_after, $22 occurred_before, $23 valid_after, $24 valid_before, $25 rows, $26 max_bytes, $27 limit, $28 all_scopes, $29 scopes
WITH RECURSIVE page AS (
    SELECT k.id, k.created_at, k.status_as_of, k.bytes
      FROM listed s CROSS JOIN LATERAL (
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until) AS status_as_of,
           CASE WHEN r.sensitivity_rank > $2 THEN 256 ELSE r.projected_bytes END AS bytes
      FROM memory_records r
     WHERE r.scope = s.scope
       AND (r.created_at, r.id) < ($3::timestamptz, $4::uuid)
       AND r.sensitivity_rank <= $2 + 1
AND ($1::timestamptz IS NULL OR r.recorded_at <= $1::timestamptz)
AND ($5::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $5::timestamptz)
         AND (r.valid_to IS NULL OR $5::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until) <> 'retracted')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until) <> 'contested')
AND ($8
     OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until) <> 'proposed')
AND ($9::text[] IS NULL OR r.type = ANY($9::text[]))
AND ($10::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($10::text[])))
AND (NOT $11 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $12) >= $13)
       AND ($14::text[] IS NULL
            OR status_at(r.status, r.retracted_at, r.contested_at, $1::timestamptz, r.proposed_until)
               = ANY($14::text[]))
       AND ($15::int[] IS NULL OR r.sensitivity_rank = ANY($15::int[]))
       AND ($16::uuid IS NULL
            OR EXISTS (SELECT 1 FROM relations l WHERE l.source_id = r.id AND l.target_id = $16::uuid)
            OR EXISTS (SELECT 1 FROM relations l WHERE l.target_id = r.id AND l.source_id = $16::uuid))
       AND ($17::text[] IS NULL OR r.fact_subject = ANY($17::text[]))
       AND ($18::text[] IS NULL OR r.fact_predicate = ANY($18::text[]))
       AND ($19::timestamptz IS NULL OR r.created_at >= $19::timestamptz)
       AND ($20::timestamptz IS NULL OR r.created_at < $20::timestamptz)
       AND ($21::timestamptz IS NULL OR r.occurred_at >= $21::timestamptz)
       AND ($22::timestamptz IS NULL OR r.occurred_at < $22::timestamptz)
       AND ($23::timestamptz IS NULL OR r.valid_to IS NULL OR r.valid_to > $23::timestamptz)
       AND ($24::timestamptz IS NULL
            OR r.valid_from IS NULL OR r.valid_from < $24::timestamptz)
     ORDER BY r.created_at DESC, r.id DESC
     LIMIT $25) k
     ORDER BY k.created_at DESC, k.id DESC
     LIMIT $25
), bounded AS (
    SELECT p.*, row_number() OVER w AS ord, sum(p.bytes) OVER w AS running
      FROM page p
    WINDOW w AS (ORDER BY p.created_at DESC, p.id DESC)
)
SELECT b.ord, b.bytes, b.running, (b.running <= $26 AND b.ord <= $27) AS fits,
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
                  AND ($28 OR x.scope = ANY($29::text[]))
                  AND x.sensitivity_rank <= $2
                  AND ($1::timestamptz IS NULL OR l.created_at <= $1::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id)) AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= $26 AND b.ord <= $27
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord
