-- $1 all_scopes, $2 scopes, $3 query, $4 df_cap, $5 as_of, $6 include_retracted, $7 include_proposed, $8 max_rank, $9 valid_at, $10 include_contested, $11 types, $12 tags, $13 salience_floor, $14 now, $15 min_salience, $16 qvec, $17 vec_k, $18 has_qvec, $19 fts_cap, $20 arm_k, $21 terms, $22 id_namespaces, $23 id_values, $24 link_scan, $25 fanout, $26 when_from, $27 when_to, $28 sd_floor_salience, $29 rrf, $30 w_vector, $31 rrf_k, $32 w_text, $33 w_entity, $34 w_salience, $35 semantic_prior, $36 when_prior, $37 adjacent_sources, $38 adjacent_decay, $39 adjacent_reach, $40 limit, $41 max_bytes
WITH qlex AS MATERIALIZED (
    -- the query's lexemes; stsq: the lexeme in the caller's scopes: as the index of scoped
    -- lexemes holds it for a few scopes (`scoped`, written in), else ANDed with the scope
    -- lexemes; any scope for a caller that reads every scope (RFC 8.1.2)
    SELECT w.lexeme, quote_literal(w.lexeme)::tsquery AS tsq,
           CASE WHEN $1 THEN quote_literal(w.lexeme)::tsquery
                WHEN true THEN scoped_tsquery(ARRAY[w.lexeme], $2::text[])
                ELSE quote_literal(w.lexeme)::tsquery && scopes_tsquery($2::text[]) END AS stsq
      FROM unnest(to_tsvector('english', coalesce($3::text, ''))) AS w
     LIMIT 32
), corpus AS (
    SELECT greatest(2.0 * $4,
                    (SELECT c.reltuples FROM pg_class c WHERE c.oid = 'memory_records'::regclass))
               ::float8 AS n
), anyq AS (
    -- any query lexeme in the caller's scopes, spelled as stsq is
    SELECT CASE WHEN $1 THEN t.q
                WHEN true THEN (SELECT scoped_tsquery(array_agg(lexeme), $2::text[])
                                        FROM qlex)
                ELSE t.q && scopes_tsquery($2::text[]) END AS q
      FROM (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS q FROM qlex) t
), seen AS MATERIALIZED (
    -- one pass over the rows that match any query lexeme in the caller's scopes, at most
    -- 2 x df_cap of them (RFC 8.1.2): `counts` marks what the caller may see (document
    -- frequencies: hidden records must not move ranks), `eligible` what passes the request's
    -- filters (candidates). For a few scopes the match reads the index of scoped lexemes,
    -- whose posting lists hold only those scopes' records; `|| ''` keeps the planner from
    -- ANDing in a bitmap of every record of the scope from the btree.
    SELECT r.id, r.search_tsv, (($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')) AS counts,
           (r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)) AS eligible
      FROM memory_records r, anyq
     WHERE anyq.q IS NOT NULL AND scoped_lexemes(r.scope, r.search_tsv) @@ anyq.q
       AND ($1 OR (r.scope || '') = ANY($2::text[]))
       AND r.sensitivity_rank <= $8 + 1
     LIMIT 2 * $4
), complete AS (
    -- every matching row was seen: frequencies and candidates come from `seen`; otherwise
    -- (the query's words match more than 2 x df_cap rows) from the index again
    SELECT count(*) < 2 * $4 AS yes FROM seen
), hits AS MATERIALIZED (
    -- when every matching row was seen: each seen row with each query lexeme it holds, one
    -- pass of matches for both the frequencies and the rows' scores (RFC 8.1.2)
    SELECT s.id, l.lexeme, s.counts, s.eligible, (length(s.search_tsv) - 1)::float8 AS dl
      FROM seen s JOIN qlex l ON s.search_tsv @@ l.tsq
     WHERE (SELECT c.yes FROM complete c)
), hit_df AS MATERIALIZED (
    -- document frequencies among them: what the caller may see (hidden rows must not move ranks)
    SELECT h.lexeme, count(*) FILTER (WHERE h.counts) AS df FROM hits h GROUP BY h.lexeme
), idf AS MATERIALIZED (
    -- idf on a grid of 2^-32: a sum of up to 32 of them is exact in double precision, so a
    -- row's BM25 sum is the same to the last bit in whatever order a plan adds it, and equal
    -- scores tie (broken by id) wherever they are computed (RFC 8.1.2)
    SELECT l.lexeme, l.tsq, d.df,
           round(ln(1.0 + (corpus.n - d.df + 0.5) / (d.df + 0.5)) * 4294967296.0) / 4294967296.0 AS idf
      FROM qlex l
     CROSS JOIN corpus
     CROSS JOIN complete
     CROSS JOIN LATERAL (
           SELECT CASE WHEN complete.yes THEN
                       least($4, coalesce((SELECT h.df FROM hit_df h
                                                    WHERE h.lexeme = l.lexeme), 0))::float8
                  ELSE (SELECT count(*)::float8 FROM (
                        SELECT 1 FROM memory_records r
                         WHERE scoped_lexemes(r.scope, r.search_tsv) @@ l.stsq
                           AND ($1 OR (r.scope || '') = ANY($2::text[]))
                           AND r.sensitivity_rank <= $8 + 1
                           AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
                         LIMIT $4) x) END AS df
           -- OFFSET 0: pulled up, this subquery would be copied into each use of df and
           -- count once per copy (RFC 8.1.5)
           OFFSET 0) d
     WHERE d.df > 0
), qq AS (
    -- candidates come from the informative lexemes (under the cap); scoring uses all of them
    SELECT coalesce((SELECT string_agg(quote_literal(lexeme), ' | ') FROM idf WHERE df < $4),
                    (SELECT string_agg(quote_literal(lexeme), ' | ') FROM idf))::tsquery AS gen,
           (SELECT string_agg(quote_literal(lexeme), ' | ') FROM idf)::tsquery AS tsq
), qs AS (
    -- the informative lexemes in the caller's scopes, spelled as stsq is
    SELECT CASE WHEN $1 THEN qq.gen
                WHEN true THEN
                     scoped_tsquery(coalesce((SELECT array_agg(lexeme) FROM idf WHERE df < $4),
                                             (SELECT array_agg(lexeme) FROM idf)),
                                    $2::text[])
                ELSE qq.gen && scopes_tsquery($2::text[]) END AS gen
      FROM qq
), vec AS MATERIALIZED (
    -- one HNSW search per requested scope, each pruned to the scope's partition when the
    -- generic plan runs (e.scope = s.scope is a parameter per rescan); for a caller that may
    -- read all scopes, one search over every partition (all_scopes is written in as a
    -- literal, RFC 8.1.5, so either form folds to plain predicates). `embeddings` is
    -- written in too: the partition itself when one scope is asked for, so that the plan
    -- names (and binding it locks) one partition, else record_embeddings (RFC 8.1.1, 13.2)
    SELECT x.id, x.dist FROM (
        SELECT v.id, v.dist
          FROM unnest(CASE WHEN $1 THEN ARRAY[NULL]::text[]
                           ELSE $2::text[] END) AS s(scope)
         CROSS JOIN LATERAL (
               SELECT e.record_id AS id, e.embedding <=> $16::vector AS dist
                 FROM record_embeddings e
                 JOIN memory_records r ON r.id = e.record_id
                WHERE ($1 OR (e.scope = s.scope AND r.scope IS NOT DISTINCT FROM s.scope))
                  AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
                ORDER BY e.embedding <=> $16::vector
                LIMIT $17) v
         WHERE $18
        ) x
     ORDER BY x.dist, x.id
     LIMIT $17
), fts_all AS MATERIALIZED (
    -- dl leaves out the scope lexeme. All matches seen: the eligible rows with an informative
    -- lexeme (of qq.gen), scored by every query lexeme they hold; else the rows the index finds
    -- for those lexemes (`complete` as a subquery: tested once, before the scan, RFC 8.1.5)
    SELECT h.id, min(h.dl) AS dl, sum(i.idf) AS s
      FROM hits h JOIN idf i ON i.lexeme = h.lexeme
     WHERE h.eligible
     GROUP BY h.id
    HAVING bool_or(i.df < $4)
        OR NOT EXISTS (SELECT 1 FROM idf x WHERE x.df < $4)
    UNION ALL
    (SELECT r.id, (length(r.search_tsv) - 1)::float8 AS dl,
            (SELECT sum(i.idf) FROM idf i WHERE r.search_tsv @@ i.tsq) AS s
       FROM memory_records r, qs
      WHERE NOT (SELECT c.yes FROM complete c) AND qs.gen IS NOT NULL AND scoped_lexemes(r.scope, r.search_tsv) @@ qs.gen
        AND ($1 OR (r.scope || '') = ANY($2::text[]))
        AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
      LIMIT $19)
), avgdl AS (
    SELECT coalesce(avg(dl), 1.0) AS v FROM fts_all
), fts AS MATERIALIZED (
    -- BM25 with term frequency 1 (k1 = 1.2, b = 0.1: turns and notes are short, and
    -- normalising length favours the shortest, emptiest ones)
    SELECT f.id, f.s * 2.2 / (1.0 + 1.2 * (0.9 + 0.1 * f.dl / greatest(a.v, 1.0))) AS score
      FROM fts_all f, avgdl a
     ORDER BY score DESC, f.id
     LIMIT $20
), ent_match AS MATERIALIZED (
    -- canonical entities named by a query term or identifier; the entity itself must be fully
    -- visible; an entity linked to more than fanout records is too common to discriminate
    SELECT m.entity_id,
           -- on idf's grid of 2^-32, so that a record's sum over its entities is exact
           round(ln(1.0 + corpus.n / (1.0 + c.links)) * 4294967296.0) / 4294967296.0 AS idf
      FROM (SELECT t.record_id AS entity_id FROM entity_terms t
             WHERE t.term = ANY($21::text[])
               AND ($1 OR t.scope = ANY($2::text[]))
            UNION
            SELECT i.record_id FROM entity_identifiers i
              JOIN unnest($22::text[], $23::text[]) AS k(ns, val)
                ON i.namespace = k.ns AND i.value = k.val
             WHERE $1 OR i.scope = ANY($2::text[])) m
      JOIN memory_records r ON r.id = m.entity_id
     CROSS JOIN corpus
     CROSS JOIN LATERAL (
           -- links to records the caller may see, as document frequencies count them:
           -- hidden records must not make an entity too common to rank (RFC 8.1.3). An
           -- entity with more than link_scan links in a direction is a hub, too common
           -- however few of them the caller sees: counting those would read every link
           SELECT CASE WHEN (SELECT count(*) FROM (
                                    SELECT 1 FROM relations l WHERE l.target_id = m.entity_id
                                     LIMIT $24 + 1) h) > $24
                         OR (SELECT count(*) FROM (
                                    SELECT 1 FROM relations l WHERE l.source_id = m.entity_id
                                     LIMIT $24 + 1) h) > $24
                       THEN greatest($24, $25) + 1
                  ELSE (SELECT count(*) FROM (
                               SELECT 1 FROM relations l JOIN memory_records x ON x.id = l.source_id
                                WHERE l.target_id = m.entity_id
                                  AND ($1 OR x.scope = ANY($2::text[]))
                                  AND x.sensitivity_rank <= $8 + 1 AND x.status <> 'retracted'
                                LIMIT $25 + 1) a)
                     + (SELECT count(*) FROM (
                               SELECT 1 FROM relations l JOIN memory_records x ON x.id = l.target_id
                                WHERE l.source_id = m.entity_id
                                  AND ($1 OR x.scope = ANY($2::text[]))
                                  AND x.sensitivity_rank <= $8 + 1 AND x.status <> 'retracted'
                                LIMIT $25 + 1) b) END AS links
           OFFSET 0) c  -- counted once, not once per use of links (as idf's df)
     WHERE ($1 OR r.scope = ANY($2::text[]))
       AND r.sensitivity_rank <= $8
       AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
       AND ($6
            OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
       AND ($7
            OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
       AND c.links <= $25
     LIMIT 64
), ent AS MATERIALIZED (
    -- the entities and the records linked to them (either direction), scored by entity idf
    SELECT x.id, sum(x.idf) AS score
      FROM (SELECT m.entity_id AS id, m.idf FROM ent_match m
            UNION ALL
            -- the links as of the read's as_of (RFC 5.6)
            SELECT l.source_id, m.idf FROM ent_match m JOIN relations l ON l.target_id = m.entity_id
             WHERE $5::timestamptz IS NULL OR l.created_at <= $5::timestamptz
            UNION ALL
            SELECT l.target_id, m.idf FROM ent_match m JOIN relations l ON l.source_id = m.entity_id
             WHERE $5::timestamptz IS NULL OR l.created_at <= $5::timestamptz) x
      JOIN memory_records r ON r.id = x.id
     WHERE true
       AND ($1 OR r.scope = ANY($2::text[]))
       AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
     GROUP BY x.id
     ORDER BY score DESC, x.id
     LIMIT $20
), sal_groups AS MATERIALIZED (
    -- without a query, salience alone proposes candidates (RFC 8.1.4), read in index order
    -- rather than computed for every record of the scope. Here: the (scope, half-life)
    -- groups of the caller's unpinned records, one probe of memory_records_decay each
    SELECT s.scope, h.half_life
      FROM unnest($2::text[]) AS s(scope)
     CROSS JOIN LATERAL (
           WITH RECURSIVE hl(half_life) AS (
                SELECT min(r.half_life_seconds) FROM memory_records r
                 WHERE r.scope = s.scope AND NOT r.pinned
                UNION ALL
                SELECT (SELECT min(r.half_life_seconds) FROM memory_records r
                         WHERE r.scope = s.scope AND NOT r.pinned AND r.half_life_seconds > hl.half_life)
                  FROM hl WHERE hl.half_life IS NOT NULL)
           SELECT hl.half_life FROM hl WHERE hl.half_life IS NOT NULL) h
     -- written-in shape flags: with a query (or every scope) the planner drops all of this
     WHERE NOT false AND NOT $1
), sal_first AS MATERIALIZED (
    -- the best arm_k that pass the filters by each order an index holds: decay_key within
    -- each group (the order of decayed salience), the floor, and pinned records' base. UNION:
    -- a record with a floor is found by two orders and must count once toward the bar
    SELECT c.id, c.cur FROM sal_groups g CROSS JOIN LATERAL (
           SELECT r.id, current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                         r.min_salience, r.pinned, $14) AS cur
             FROM memory_records r
            WHERE r.scope = g.scope AND NOT r.pinned AND r.half_life_seconds = g.half_life
              AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
            ORDER BY decay_key(r.base_salience, r.reinforced_at, r.half_life_seconds) DESC
            LIMIT $20) c
     WHERE NOT false AND NOT $1
    UNION
    SELECT c.id, c.cur
      FROM unnest($2::text[]) AS s(scope)
     CROSS JOIN LATERAL (
           SELECT r.id, current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                         r.min_salience, r.pinned, $14) AS cur
             FROM memory_records r
            WHERE r.scope = s.scope AND NOT r.pinned AND r.min_salience > 0
              AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
            ORDER BY least(r.base_salience, r.min_salience) DESC
            LIMIT $20) c
     WHERE NOT false AND NOT $1
    UNION
    SELECT c.id, c.cur
      FROM unnest($2::text[]) AS s(scope)
     CROSS JOIN LATERAL (
           SELECT r.id, r.base_salience AS cur
             FROM memory_records r
            WHERE r.scope = s.scope AND r.pinned
              AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
            ORDER BY r.base_salience DESC
            LIMIT $20) c
     WHERE NOT false AND NOT $1
), sal_bar AS (
    -- the arm_k-th best current salience among them (none: no bar). A record's current
    -- salience is at most the larger of its floor and 2^(decay_key - now / half_life)
    -- (equal unless reinforced_at is in the future, where it is base), so every record at
    -- or above the bar is within one of the three ranges below: ties included, exact
    SELECT coalesce((SELECT f.cur FROM sal_first f ORDER BY f.cur DESC
                      LIMIT 1 OFFSET $20 - 1), '-Infinity'::float8) AS c
     WHERE NOT false AND NOT $1
), sal_cand AS MATERIALIZED (
    SELECT c.id FROM sal_groups g CROSS JOIN sal_bar b CROSS JOIN LATERAL (
           -- log2(bar) + now / half_life, less a margin for rounding (more rows, never fewer)
           SELECT CASE WHEN b.c > 0 THEN y.k - 1e-9 * (1.0 + abs(y.k)) ELSE '-Infinity'::float8 END AS k
             FROM (SELECT ln(greatest(b.c, 1e-300)) / ln(2.0::float8)
                          + extract(epoch FROM $14::timestamptz)::float8 / g.half_life AS k) y) x
     CROSS JOIN LATERAL (
           -- OFFSET 0 keeps this a range scan of memory_records_decay per group
           SELECT r.id FROM memory_records r
            WHERE r.scope = g.scope AND NOT r.pinned AND r.half_life_seconds = g.half_life
              AND decay_key(r.base_salience, r.reinforced_at, r.half_life_seconds) >= x.k
              AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
           OFFSET 0) c
     WHERE NOT false AND NOT $1
    UNION
    SELECT r.id
      FROM unnest($2::text[]) AS s(scope)
     CROSS JOIN sal_bar b
      JOIN memory_records r ON r.scope = s.scope
     WHERE NOT false AND NOT $1
       AND NOT r.pinned AND r.min_salience > 0 AND least(r.base_salience, r.min_salience) > b.c
       AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
    UNION
    -- records whose floor is the bar tie with it (a store decayed to its floors): the final
    -- order breaks ties by recency, so the most recent arm_k of them are enough
    SELECT c.id
      FROM unnest($2::text[]) AS s(scope)
     CROSS JOIN sal_bar b
     CROSS JOIN LATERAL (
           SELECT r.id FROM memory_records r
            WHERE r.scope = s.scope AND NOT r.pinned AND r.min_salience > 0
              AND least(r.base_salience, r.min_salience) = b.c
              AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
            ORDER BY least(r.base_salience, r.min_salience) DESC, r.created_at DESC, r.id
            LIMIT $20) c
     WHERE NOT false AND NOT $1
    UNION
    SELECT r.id
      FROM unnest($2::text[]) AS s(scope)
     CROSS JOIN sal_bar b
      JOIN memory_records r ON r.scope = s.scope
     WHERE NOT false AND NOT $1
       AND r.pinned AND r.base_salience >= b.c
       AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
), sal AS MATERIALIZED (
    SELECT x.id FROM (
           SELECT r.id FROM memory_records r
            WHERE NOT false AND NOT $1
              AND r.id = ANY(ARRAY(SELECT c.id FROM sal_cand c))
            ORDER BY current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                      r.min_salience, r.pinned, $14) DESC, r.created_at DESC, r.id
            LIMIT $20) x
    UNION ALL
    -- a caller that may read every scope: every record is ranked (RFC 8.1.4)
    SELECT x.id FROM (
           SELECT r.id FROM memory_records r
            WHERE NOT false AND $1
              AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15)
            ORDER BY current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                      r.min_salience, r.pinned, $14) DESC, r.created_at DESC, r.id
            LIMIT $20) x
), pool AS (
    SELECT id FROM vec UNION SELECT id FROM fts UNION SELECT id FROM ent UNION SELECT id FROM sal
), feat AS MATERIALIZED (
    -- every candidate with every feature the arms can give it (RFC 8.1)
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) AS status,
           -- a stored zero vector (no direction) is NaN away from everything: no score, as
           -- without a vector (NaN would poison every fused score, RFC 8.1.1)
           nullif(1.0 - coalesce(v.dist, (SELECT e.embedding <=> $16::vector
                                            FROM record_embeddings e
                                           WHERE e.scope = r.scope AND e.record_id = r.id
                                             AND $18)), 'NaN'::float8)
               AS vector_score,
           CASE WHEN r.search_tsv @@ qq.tsq THEN
                (SELECT sum(i.idf) FROM idf i WHERE r.search_tsv @@ i.tsq) * 2.2
                / (1.0 + 1.2 * (0.9 + 0.1 * (length(r.search_tsv) - 1) / greatest(a.v, 1.0))) END AS text_score,
           n.score AS entity_score,
           current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                            r.pinned, $14) AS salience,
           (v.id IS NOT NULL) AS in_vector, (f.id IS NOT NULL) AS in_text, (n.id IS NOT NULL) AS in_entity,
           (r.type = 'semantic') AS is_semantic,
           -- RFC 8.2.2: it happened on a day or in a month the query names
           EXISTS (SELECT 1 FROM unnest($26::timestamptz[], $27::timestamptz[]) AS w(a, b)
                    WHERE r.occurred_at >= w.a AND r.occurred_at < w.b) AS in_when,
           -- RFC 8.3: projected bytes; a redacted view counts 256
           CASE WHEN r.sensitivity_rank > $8 THEN 256 ELSE r.projected_bytes END AS bytes
      FROM pool p
      JOIN memory_records r ON r.id = p.id
     CROSS JOIN qq
     CROSS JOIN avgdl a
      LEFT JOIN vec v ON v.id = r.id
      LEFT JOIN fts f ON f.id = r.id
      LEFT JOIN ent n ON n.id = r.id
), filled AS (
    -- zsum (RFC 8.2): a missing vector similarity counts as the pool's lowest, a missing
    -- full-text or entity score as 0
    SELECT x.*, coalesce(x.vector_score, min(x.vector_score) OVER ()) AS fv,
           coalesce(x.text_score, 0) AS ft, coalesce(x.entity_score, 0) AS fe
      FROM feat x
), moments AS (
    -- per feature: mean and spread over the pool (the spread of salience floored); rrf:
    -- fractional ranks among the candidates a feature scored above 0, ties sharing their mean
    SELECT y.*,
           avg(y.fv) OVER () AS mv, stddev_pop(y.fv) OVER () AS sv,
           avg(y.ft) OVER () AS mt, stddev_pop(y.ft) OVER () AS st,
           avg(y.fe) OVER () AS me, stddev_pop(y.fe) OVER () AS se,
           avg(y.salience) OVER () AS ms,
           greatest(stddev_pop(y.salience) OVER (), $28) AS ss,
           rank() OVER (ORDER BY y.rv DESC NULLS LAST)
               + (count(*) OVER (PARTITION BY y.rv) - 1) / 2.0 AS kv,
           rank() OVER (ORDER BY y.rt DESC NULLS LAST)
               + (count(*) OVER (PARTITION BY y.rt) - 1) / 2.0 AS kt,
           rank() OVER (ORDER BY y.re DESC NULLS LAST)
               + (count(*) OVER (PARTITION BY y.re) - 1) / 2.0 AS ke,
           rank() OVER (ORDER BY y.rs DESC NULLS LAST)
               + (count(*) OVER (PARTITION BY y.rs) - 1) / 2.0 AS ks
      FROM (SELECT z.*,
                   CASE WHEN z.vector_score > 0 THEN z.vector_score END AS rv,
                   CASE WHEN z.text_score > 0 THEN z.text_score END AS rt,
                   CASE WHEN z.entity_score > 0 THEN z.entity_score END AS re,
                   CASE WHEN z.salience > 0 THEN z.salience END AS rs
              FROM filled z) y
), scored AS (
    -- RFC 8.2: one fused score; a constant feature adds nothing
    SELECT m.id, m.status, m.vector_score, m.text_score, m.entity_score, m.salience,
           m.created_at, m.bytes, m.is_semantic,
           CASE WHEN $29 THEN
                coalesce($30 / ($31 + CASE WHEN m.rv IS NOT NULL THEN m.kv END), 0)
              + coalesce($32 / ($31 + CASE WHEN m.rt IS NOT NULL THEN m.kt END), 0)
              + coalesce($33 / ($31 + CASE WHEN m.re IS NOT NULL THEN m.ke END), 0)
              + coalesce($34 / ($31 + CASE WHEN m.rs IS NOT NULL THEN m.ks END), 0)
           ELSE
                CASE WHEN m.sv > 1e-12 THEN $30 * (m.fv - m.mv) / m.sv ELSE 0 END
              + CASE WHEN m.st > 1e-12 THEN $32 * (m.ft - m.mt) / m.st ELSE 0 END
              + CASE WHEN m.se > 1e-12 THEN $33 * (m.fe - m.me) / m.se ELSE 0 END
              + CASE WHEN m.ss > 1e-12 THEN $34 * (m.salience - m.ms) / m.ss ELSE 0 END
              -- a fact outranks the episodes that state it on equal evidence
              + CASE WHEN m.is_semantic THEN $35 ELSE 0 END
              -- a question naming a day or month asks about what happened then (RFC 8.2.2)
              + CASE WHEN m.in_when THEN $36 ELSE 0 END
           END AS score,
           count(*) OVER () AS pool_size,
           count(*) FILTER (WHERE m.in_vector) OVER () AS n_vector,
           count(*) FILTER (WHERE m.in_text) OVER () AS n_text,
           count(*) FILTER (WHERE m.in_entity) OVER () AS n_entity
      FROM moments m
), adj_sources AS MATERIALIZED (
    SELECT s.id, s.score, r.scope, r.occurred_at
      FROM scored s JOIN memory_records r ON r.id = s.id
     WHERE r.type = 'episodic' AND r.occurred_at IS NOT NULL AND s.status = 'active'
       -- as expansion (RFC 8.4): nothing is followed from or to a record shown redacted
       AND r.sensitivity_rank <= $8
     ORDER BY s.score DESC, s.id
     LIMIT $37
), adj_lift AS (
    -- each side read in index order (memory_records_episode_time) and cut at the reach before
    -- it is numbered; an episode hidden or redacted is skipped: it neither enters nor takes a place
    SELECT n.id, h.score, greatest(h.score, 0) * power($38, n.k) AS share,
           CASE WHEN h.score > 0 THEN h.score * power($38, n.k)
                ELSE h.score + power($38, n.k) - 1 END AS entry
      FROM adj_sources h
     CROSS JOIN LATERAL (
           SELECT b.id, row_number() OVER (ORDER BY b.occurred_at DESC, b.id DESC) AS k
             FROM (SELECT r.id, r.occurred_at FROM memory_records r
                    WHERE r.scope = h.scope AND r.type = 'episodic'
                      AND (r.occurred_at, r.id) < (h.occurred_at, h.id)
                      AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15) AND r.sensitivity_rank <= $8
                    ORDER BY r.occurred_at DESC, r.id DESC
                    LIMIT $39) b
           UNION ALL
           SELECT a.id, row_number() OVER (ORDER BY a.occurred_at, a.id) AS k
             FROM (SELECT r.id, r.occurred_at FROM memory_records r
                    WHERE r.scope = h.scope AND r.type = 'episodic'
                      AND (r.occurred_at, r.id) > (h.occurred_at, h.id)
                      AND r.sensitivity_rank <= $8 + 1
AND ($5::timestamptz IS NULL OR r.recorded_at <= $5::timestamptz)
AND ($9::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= $9::timestamptz)
         AND (r.valid_to IS NULL OR $9::timestamptz < r.valid_to)))
AND ($6
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'retracted')
AND ($10
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'contested')
AND ($7
     OR status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until) <> 'proposed')
AND ($11::text[] IS NULL OR r.type = ANY($11::text[]))
AND ($12::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY($12::text[])))
AND (NOT $13 OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, $14) >= $15) AND r.sensitivity_rank <= $8
                    ORDER BY r.occurred_at, r.id
                    LIMIT $39) a) n
), adj_raised AS (
    -- the best each episode gets: a pool member its score plus its share, an episode outside
    -- the pool its entry; never past its source
    SELECT l.id, max(CASE WHEN x.id IS NULL THEN l.entry ELSE least(x.score + l.share, l.score) END)
               AS score
      FROM adj_lift l LEFT JOIN scored x ON x.id = l.id
     GROUP BY l.id
), adj_capped AS (
    -- nor past an active fact: the store's current belief keeps its place above the episodes
    -- that ranked below it (RFC 8.2)
    SELECT a.id, least(a.score, coalesce(
               (SELECT min(f.score) FROM scored f
                 WHERE f.is_semantic AND f.status = 'active'
                   AND f.score > coalesce(x.score, '-Infinity'::float8)),
               'Infinity'::float8)) AS score
      FROM adj_raised a LEFT JOIN scored x ON x.id = a.id
), lifted AS (
    SELECT s.id, s.status, s.vector_score, s.text_score, s.entity_score, s.salience, s.created_at,
           s.bytes, greatest(s.score, c.score) AS score, s.pool_size, s.n_vector, s.n_text,
           s.n_entity, coalesce(c.score > s.score, false) AS lifted
      FROM scored s LEFT JOIN adj_capped c ON c.id = s.id
    UNION ALL
    -- outside the pool an episode has no evidence of its own (the pool's mean, 0 in zsum)
    SELECT r.id, status_at(r.status, r.retracted_at, r.contested_at, $5::timestamptz, r.proposed_until),
           NULL, NULL, NULL,
           current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                            r.pinned, $14),
           r.created_at,
           CASE WHEN r.sensitivity_rank > $8 THEN 256 ELSE r.projected_bytes END,
           c.score, p.pool_size, p.n_vector, p.n_text, p.n_entity, true
      FROM adj_capped c
      JOIN memory_records r ON r.id = c.id
     CROSS JOIN (SELECT max(pool_size) AS pool_size, max(n_vector) AS n_vector,
                        max(n_text) AS n_text, max(n_entity) AS n_entity FROM scored) p
     WHERE NOT EXISTS (SELECT 1 FROM scored s WHERE s.id = c.id)
), ranked AS (
    -- RFC 8.2, 5.1: every active record above every contested one, then the fused score;
    -- ties by salience, recency, id (with adjacent episodes, 8.2.1: first the unlifted)
    SELECT s.*, row_number() OVER (ORDER BY s.status <> 'active', s.score DESC,
                                            s.lifted, s.salience DESC,
                                            s.created_at DESC, s.id) AS ord
      FROM lifted s
), bounded AS (
    -- RFC 8.3: cut at the row cap and the running projected bytes before hydrating
    SELECT k.*, sum(k.bytes) OVER (ORDER BY k.ord) AS running
      FROM ranked k
     WHERE k.ord <= $40
)
SELECT 'root' AS kind, b.ord, b.bytes, b.running, (b.running <= $41) AS fits, b.score,
       b.status AS status_as_of, b.vector_score, b.text_score, b.entity_score,
       b.salience AS salience_now, b.pool_size, b.n_vector, b.n_text, b.n_entity,
       NULL AS source_id, NULL AS predicate, NULL AS target_id, NULL AS other,
       NULL AS other_scope, NULL AS other_sensitivity, NULL AS other_status, NULL AS n,
       NULL AS hydrated,
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
                  AND ($1 OR x.scope = ANY($2::text[]))
                  AND x.sensitivity_rank <= $8
                  AND ($5::timestamptz IS NULL OR l.created_at <= $5::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id)) AS relations,
       -- RFC 8.2.3: every pool row's id, and the token signs of those that fit, for the
       -- re-ranking (never with the first hop, whose rows do not have these two columns)
       b.id AS pool_id,
       (SELECT e.token_signs FROM record_embeddings e
         WHERE e.scope = r.scope AND e.record_id = r.id) AS token_signs
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= $41
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY kind DESC, ord, n
