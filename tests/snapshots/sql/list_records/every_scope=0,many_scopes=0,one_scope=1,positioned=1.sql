-- $1 scopes, $2 as_of, $3 max_rank, $4 after_created, $5 after_id, $6 valid_at, $7 include_retracted, $8 include_contested, $9 include_proposed, $10 types, $11 tags, $12 salience_floor, $13 now, $14 min_salience, $15 statuses, $16 ranks, $17 entity, $18 subjects, $19 predicates, $20 created_after, $21 created_before, $22 occurred_after, $23 occurred_before, $24 valid_after, $25 valid_before, $26 rows, $27 max_bytes, $28 limit, $29 all_scopes
WITH RECURSIVE listed(scope) AS (
    SELECT ($1::text[])[1]
), page AS (
    SELECT k.id, k.created_at, k.status_as_of, k.bytes
      FROM listed s CROSS JOIN LATERAL (
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until) AS status_as_of,
           CASE WHEN r.sensitivity_rank > $3 THEN 256 ELSE r.projected_bytes END AS bytes
      FROM memory_records r
     WHERE r.scope = s.scope
       AND (r.created_at, r.id) < ($4::timestamptz, $5::uuid)
       AND r.sensitivity_rank <= $3 + 1
AND ($2::timestamptz IS NULL OR r.recorded_at <= $2::timestamptz)
AND ($6::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $6::timestamptz)
         AND (r.valid_to IS NULL OR $6::timestamptz < r.valid_to)))
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until) <> 'retracted')
AND ($8
     OR status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until) <> 'contested')
AND ($9
     OR status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until) <> 'proposed')
AND ($10::text[] IS NULL OR r.type = ANY($10::text[]))
AND ($11::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($11::text[])))
AND (NOT $12 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $13) >= $14)
       AND ($15::text[] IS NULL
            OR status_at(r.status, r.retracted_at, r.contested_at, $2::timestamptz, r.proposed_until)
               = ANY($15::text[]))
       AND ($16::int[] IS NULL OR r.sensitivity_rank = ANY($16::int[]))
       AND ($17::uuid IS NULL
            OR EXISTS (SELECT 1 FROM relations l WHERE l.source_id = r.id AND l.target_id = $17::uuid)
            OR EXISTS (SELECT 1 FROM relations l WHERE l.target_id = r.id AND l.source_id = $17::uuid))
       AND ($18::text[] IS NULL OR r.fact_subject = ANY($18::text[]))
       AND ($19::text[] IS NULL OR r.fact_predicate = ANY($19::text[]))
       AND ($20::timestamptz IS NULL OR r.created_at >= $20::timestamptz)
       AND ($21::timestamptz IS NULL OR r.created_at < $21::timestamptz)
       AND ($22::timestamptz IS NULL OR r.occurred_at >= $22::timestamptz)
       AND ($23::timestamptz IS NULL OR r.occurred_at < $23::timestamptz)
       AND ($24::timestamptz IS NULL OR r.valid_to IS NULL OR r.valid_to > $24::timestamptz)
       AND ($25::timestamptz IS NULL
            OR r.valid_from IS NULL OR r.valid_from < $25::timestamptz)
     ORDER BY r.created_at DESC, r.id DESC
     LIMIT $26) k
     ORDER BY k.created_at DESC, k.id DESC
     LIMIT $26
), bounded AS (
    SELECT p.*, row_number() OVER w AS ord, sum(p.bytes) OVER w AS running
      FROM page p
    WINDOW w AS (ORDER BY p.created_at DESC, p.id DESC)
)
SELECT b.ord, b.bytes, b.running, (b.running <= $27 AND b.ord <= $28) AS fits,
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
                  AND ($29 OR x.scope = ANY($1::text[]))
                  AND x.sensitivity_rank <= $3
                  AND ($2::timestamptz IS NULL OR l.created_at <= $2::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id)) AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= $27 AND b.ord <= $28
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord
