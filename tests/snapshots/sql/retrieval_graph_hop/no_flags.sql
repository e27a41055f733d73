-- $1 frontier, $2 expanded, $3 known, $4 hop_bytes, $5 as_of, $6 all_scopes, $7 scopes, $8 max_rank, $9 valid_at, $10 include_retracted, $11 include_contested, $12 include_proposed, $13 hop_rows, $14 hop_edges, $15 hop_new
WITH f AS (
    SELECT DISTINCT unnest($1::uuid[]) AS id
), hop_expanded AS (
    SELECT unnest($2::uuid[]) AS id
), hop_known AS (
    SELECT unnest($3::uuid[]) AS id
), hop_budget AS (
    SELECT $4::bigint AS v
), e AS (
    -- at most hop_rows edges per frontier node and direction, so a hub costs no more; the
    -- far end passes the filters (and is not a node expanded before) ahead of that cut, so
    -- that edges the caller may not follow never crowd out one it may (RFC 8.4). A relation
    -- is followed only to a record shown in full: a view omits the others (RFC 2.5)
    SELECT o.* FROM f, LATERAL (
           SELECT l.source_id, l.predicate, l.target_id, l.target_id AS other, l.weight,
                  l.created_at, r.scope, r.sensitivity, r.status, r.retracted_at,
                  r.contested_at, r.proposed_until, r.projected_bytes
             FROM relations l JOIN memory_records r ON r.id = l.target_id
            WHERE l.source_id = f.id
              AND ($5::timestamptz IS NULL OR l.created_at <= $5::timestamptz)
              AND NOT EXISTS (SELECT 1 FROM hop_expanded x WHERE x.id = l.target_id)
              AND ($6 OR r.scope = ANY($7::text[]))
              AND r.sensitivity_rank <= $8 AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($11
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($12
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
            ORDER BY l.predicate, l.target_id LIMIT $13) o
    UNION ALL
    SELECT i.* FROM f, LATERAL (
           SELECT l.source_id, l.predicate, l.target_id, l.source_id AS other, l.weight,
                  l.created_at, r.scope, r.sensitivity, r.status, r.retracted_at,
                  r.contested_at, r.proposed_until, r.projected_bytes
             FROM relations l JOIN memory_records r ON r.id = l.source_id
            WHERE l.target_id = f.id
              AND ($5::timestamptz IS NULL OR l.created_at <= $5::timestamptz)
              AND NOT EXISTS (SELECT 1 FROM hop_expanded x WHERE x.id = l.source_id)
              AND ($6 OR r.scope = ANY($7::text[]))
              AND r.sensitivity_rank <= $8 AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($11
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($12
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
            LIMIT $13) i
), hop AS MATERIALIZED (
    SELECT e.source_id, e.predicate, e.target_id, e.other, e.scope, e.sensitivity,
           status_at(e.status, e.retracted_at, e.contested_at, $5::timestamptz, e.proposed_until) AS status,
           e.projected_bytes AS bytes,
           row_number() OVER (ORDER BY coalesce(e.weight, 0) DESC, e.created_at, e.source_id,
                                       e.predicate, e.target_id) AS n
      FROM e
     ORDER BY n
     LIMIT $13
), edges AS (
    -- each edge once (a relation between two frontier nodes is found from both ends), at most
    -- hop_edges of them: the edges the expansion will take, in its order
    SELECT * FROM (SELECT DISTINCT ON (h.source_id, h.predicate, h.target_id) h.*
                     FROM hop h ORDER BY h.source_id, h.predicate, h.target_id, h.n) d
     ORDER BY d.n
     LIMIT $14
), fresh AS (
    -- the neighbours these edges discover, in discovery order, up to hop_new, with the
    -- running projected bytes: the rows worth hydrating now (RFC 8.3)
    SELECT x.other, x.n, sum(x.bytes) OVER (ORDER BY x.n) AS running
      FROM (SELECT DISTINCT ON (d.other) d.other, d.n, d.bytes
              FROM edges d WHERE NOT EXISTS (SELECT 1 FROM hop_known k WHERE k.id = d.other)
             ORDER BY d.other, d.n) x
     ORDER BY x.n
     LIMIT $15
)
SELECT h.bytes, h.source_id, h.predicate, h.target_id, h.other, h.scope AS other_scope,
h.sensitivity AS other_sensitivity, h.status AS other_status, h.n,
(x.id IS NOT NULL) AS hydrated, x.*
  FROM hop h
LEFT JOIN fresh w ON w.n = h.n AND w.running <= (SELECT v FROM hop_budget)
LEFT JOIN LATERAL (
      -- the neighbour's columns only on the rows that hydrate it: the subqueries among them
      -- (tags, provenance, relations) run for those rows alone, not for every edge
      SELECT r.id, r.type, r.scope, r.sensitivity, r.confidence, coalesce((SELECT c.salience FROM salience_checkpoints c
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
               ORDER BY s.id)) AS provenance, to_jsonb(ARRAY(SELECT jsonb_build_object('predicate', l.predicate, 'target_id', l.target_id,
                                         'weight', l.weight, 'target_scope', x.scope,
                                         'target_sensitivity', x.sensitivity)
                 FROM relations l JOIN memory_records x ON x.id = l.target_id
                WHERE l.source_id = r.id
                  AND ($6 OR x.scope = ANY($7::text[]))
                  AND x.sensitivity_rank <= $8
                  AND ($5::timestamptz IS NULL OR l.created_at <= $5::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id)) AS relations
        FROM memory_records r LEFT JOIN record_payloads p ON p.record_id = r.id
       WHERE r.id = w.other
      OFFSET 0) x ON true
 ORDER BY h.n
