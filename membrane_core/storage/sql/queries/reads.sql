-- Retrieval reads (RFC 8). Every block filters scope, sensitivity (at most one level above the
-- caller's maximum: such rows are returned redacted), transaction time (as_of), valid time
-- (valid_at) and revision status in SQL; the service checks each hydrated row again.

-- name: retrieval_scan_settings
-- Per-transaction settings of a retrieval: iterative HNSW scans so that filters do not starve results (RFC 8.1), generic plans, no parallel workers (RFC 8.1.5).
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.ef_search', %(ef_search)s::text, true),
       set_config('hnsw.max_scan_tuples', %(max_scan_tuples)s::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('max_parallel_workers_per_gather', '0', true)

-- name: retrieval_roots
-- Hybrid retrieval in one statement: the candidate pool of the vector, full-text (BM25), entity and salience arms with every feature (RFC 8.1), fused (8.2), cut by rows and projected bytes, and what fits hydrated (8.3).
WITH qlex AS MATERIALIZED (
    -- the query's lexemes; stsq: the lexeme in the caller's scopes: as the index of scoped
    -- lexemes holds it for a few scopes (`scoped`, written in), else ANDed with the scope
    -- lexemes; any scope for a caller that reads every scope (RFC 8.1.2)
    SELECT w.lexeme, quote_literal(w.lexeme)::tsquery AS tsq,
           CASE WHEN %(all_scopes)s THEN quote_literal(w.lexeme)::tsquery
                WHEN %(scoped)s THEN scoped_tsquery(ARRAY[w.lexeme], %(scopes)s::text[])
                ELSE quote_literal(w.lexeme)::tsquery && scopes_tsquery(%(scopes)s::text[]) END AS stsq
      FROM unnest(to_tsvector('english', coalesce(%(query)s::text, ''))) AS w
     LIMIT 32
), corpus AS (
    SELECT greatest(2.0 * %(df_cap)s,
                    (SELECT c.reltuples FROM pg_class c WHERE c.oid = 'memory_records'::regclass))
               ::float8 AS n
), anyq AS (
    -- any query lexeme in the caller's scopes, spelled as stsq is
    SELECT CASE WHEN %(all_scopes)s THEN t.q
                WHEN %(scoped)s THEN (SELECT scoped_tsquery(array_agg(lexeme), %(scopes)s::text[])
                                        FROM qlex)
                ELSE t.q && scopes_tsquery(%(scopes)s::text[]) END AS q
      FROM (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS q FROM qlex) t
), seen AS MATERIALIZED (
    -- one pass over the rows that match any query lexeme in the caller's scopes, at most
    -- 2 x df_cap of them (RFC 8.1.2): `counts` marks what the caller may see (document
    -- frequencies: hidden records must not move ranks), `eligible` what passes the request's
    -- filters (candidates). For a few scopes the match reads the index of scoped lexemes,
    -- whose posting lists hold only those scopes' records; `|| ''` keeps the planner from
    -- ANDing in a bitmap of every record of the scope from the btree.
    SELECT r.id, r.search_tsv, (/*@counted_filters*/) AS counts,
           (/*@request_filters*/) AS eligible
      FROM memory_records r, anyq
     WHERE anyq.q IS NOT NULL AND /*@match_scoped*/ @@ anyq.q
       AND (%(all_scopes)s OR (r.scope || '') = ANY(%(scopes)s::text[]))
       AND r.sensitivity_rank <= %(max_rank)s + 1
     LIMIT 2 * %(df_cap)s
), complete AS (
    -- every matching row was seen: frequencies and candidates come from `seen`; otherwise
    -- (the query's words match more than 2 x df_cap rows) from the index again
    SELECT count(*) < 2 * %(df_cap)s AS yes FROM seen
), hits AS MATERIALIZED (
    -- when every matching row was seen: each seen row with each query lexeme it holds, one
    -- pass of matches for both the frequencies and the rows' scores (RFC 8.1.2)
    SELECT s.id, l.lexeme, s.counts, s.eligible, (length(s.search_tsv) - 1)::float8 AS dl
      FROM complete, seen s JOIN qlex l ON s.search_tsv @@ l.tsq
     WHERE complete.yes
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
                       least(%(df_cap)s, coalesce((SELECT h.df FROM hit_df h
                                                    WHERE h.lexeme = l.lexeme), 0))::float8
                  ELSE (SELECT count(*)::float8 FROM (
                        SELECT 1 FROM memory_records r
                         WHERE /*@match_scoped*/ @@ l.stsq
                           AND (%(all_scopes)s OR (r.scope || '') = ANY(%(scopes)s::text[]))
                           AND r.sensitivity_rank <= %(max_rank)s + 1
                           AND /*@counted_filters*/
                         LIMIT %(df_cap)s) x) END AS df
           -- OFFSET 0: pulled up, this subquery would be copied into each use of df and
           -- count once per copy (RFC 8.1.5)
           OFFSET 0) d
     WHERE d.df > 0
), qq AS (
    -- candidates come from the informative lexemes (under the cap); scoring uses all of them
    SELECT coalesce((SELECT string_agg(quote_literal(lexeme), ' | ') FROM idf WHERE df < %(df_cap)s),
                    (SELECT string_agg(quote_literal(lexeme), ' | ') FROM idf))::tsquery AS gen,
           (SELECT string_agg(quote_literal(lexeme), ' | ') FROM idf)::tsquery AS tsq
), qs AS (
    -- the informative lexemes in the caller's scopes, spelled as stsq is
    SELECT CASE WHEN %(all_scopes)s THEN qq.gen
                WHEN %(scoped)s THEN
                     scoped_tsquery(coalesce((SELECT array_agg(lexeme) FROM idf WHERE df < %(df_cap)s),
                                             (SELECT array_agg(lexeme) FROM idf)),
                                    %(scopes)s::text[])
                ELSE qq.gen && scopes_tsquery(%(scopes)s::text[]) END AS gen
      FROM qq
)/*?has_tags*/, tagged AS MATERIALIZED (
    -- with a tag filter, the tagged records (up to tag_cap + 1): when there are at most
    -- tag_cap, the vector arm ranks them exactly, instead of walking the HNSW graph for
    -- matches that may be rare or absent (RFC 8.1.1)
    SELECT DISTINCT t.record_id FROM record_tags t
      JOIN memory_records r ON r.id = t.record_id
     WHERE t.tag = ANY(%(tags)s::text[])
       -- only what the request may return is counted: records it may not see must not
       -- decide how the arm ranks (RFC 8.1.1)
       AND (%(all_scopes)s OR r.scope = ANY(%(scopes)s::text[]))
       AND /*@request_filters*/
     LIMIT %(tag_cap)s + 1
), few_tagged AS (
    SELECT count(*) <= %(tag_cap)s AS yes FROM tagged
)/*?end*/, vec AS MATERIALIZED (
    -- one HNSW search per requested scope, each pruned to the scope's partition when the
    -- generic plan runs (e.scope = s.scope is a parameter per rescan); for a caller that may
    -- read all scopes, one search over every partition (all_scopes is written in as a
    -- literal, RFC 8.1.5, so either form folds to plain predicates). `embeddings` is
    -- written in too: the partition itself when one scope is asked for, so that the plan
    -- names (and binding it locks) one partition, else record_embeddings (RFC 8.1.1, 13.2)
    SELECT x.id, x.dist FROM (
        SELECT v.id, v.dist
          FROM unnest(CASE WHEN %(all_scopes)s THEN ARRAY[NULL]::text[]
                           ELSE %(scopes)s::text[] END) AS s(scope)
         CROSS JOIN LATERAL (
               SELECT e.record_id AS id, e.embedding <=> %(qvec)s::vector AS dist
                 FROM %(embeddings)s e
                 JOIN memory_records r ON r.id = e.record_id
                WHERE (%(all_scopes)s OR (e.scope = s.scope AND r.scope = s.scope))
                  AND /*@request_filters*/
                ORDER BY e.embedding <=> %(qvec)s::vector
                LIMIT %(vec_k)s) v
         WHERE %(has_qvec)s/*?has_tags*/ AND NOT (SELECT yes FROM few_tagged)/*?end*/
        /*?has_tags*/UNION ALL
        SELECT t.id, t.dist FROM (
               -- few tagged records: rank them exactly (RFC 8.1.1); tagged holds only
               -- records that pass the request's scope and filters
               SELECT r.id, e.embedding <=> %(qvec)s::vector AS dist
                 FROM tagged g
                 JOIN memory_records r ON r.id = g.record_id
                 JOIN %(embeddings)s e ON e.scope = r.scope AND e.record_id = r.id
                WHERE %(has_qvec)s AND (SELECT yes FROM few_tagged)
                ORDER BY 2
                LIMIT %(vec_k)s) t/*?end*/) x
     ORDER BY x.dist, x.id
     LIMIT %(vec_k)s
), fts_all AS MATERIALIZED (
    -- dl leaves out the scope lexeme every record carries. Every matching row was seen: the
    -- eligible rows holding an informative lexeme (those of qq.gen), scored by every query
    -- lexeme they hold; else the rows the index finds for the informative lexemes
    SELECT h.id, min(h.dl) AS dl, sum(i.idf) AS s
      FROM hits h JOIN idf i ON i.lexeme = h.lexeme
     WHERE h.eligible
     GROUP BY h.id
    HAVING bool_or(i.df < %(df_cap)s)
        OR NOT EXISTS (SELECT 1 FROM idf x WHERE x.df < %(df_cap)s)
    UNION ALL
    (SELECT r.id, (length(r.search_tsv) - 1)::float8 AS dl,
            (SELECT sum(i.idf) FROM idf i WHERE r.search_tsv @@ i.tsq) AS s
       FROM memory_records r, qs, complete
      WHERE NOT complete.yes AND qs.gen IS NOT NULL AND /*@match_scoped*/ @@ qs.gen
        AND (%(all_scopes)s OR (r.scope || '') = ANY(%(scopes)s::text[]))
        AND /*@request_filters*/
      LIMIT %(fts_cap)s)
), avgdl AS (
    SELECT coalesce(avg(dl), 1.0) AS v FROM fts_all
), fts AS MATERIALIZED (
    -- BM25 with term frequency 1 (k1 = 1.2, b = 0.1: turns and notes are short, and
    -- normalising length favours the shortest, emptiest ones)
    SELECT f.id, f.s * 2.2 / (1.0 + 1.2 * (0.9 + 0.1 * f.dl / greatest(a.v, 1.0))) AS score
      FROM fts_all f, avgdl a
     ORDER BY score DESC, f.id
     LIMIT %(arm_k)s
), ent_match AS MATERIALIZED (
    -- canonical entities named by a query term or identifier; the entity itself must be fully
    -- visible; an entity linked to more than fanout records is too common to discriminate
    SELECT m.entity_id,
           -- on idf's grid of 2^-32, so that a record's sum over its entities is exact
           round(ln(1.0 + corpus.n / (1.0 + c.links)) * 4294967296.0) / 4294967296.0 AS idf
      FROM (SELECT t.record_id AS entity_id FROM entity_terms t
             WHERE t.term = ANY(%(terms)s::text[])
               AND (%(all_scopes)s OR t.scope = ANY(%(scopes)s::text[]))
            UNION
            SELECT i.record_id FROM entity_identifiers i
              JOIN unnest(%(id_namespaces)s::text[], %(id_values)s::text[]) AS k(ns, val)
                ON i.namespace = k.ns AND i.value = k.val
             WHERE %(all_scopes)s OR i.scope = ANY(%(scopes)s::text[])) m
      JOIN memory_records r ON r.id = m.entity_id
     CROSS JOIN corpus
     CROSS JOIN LATERAL (
           -- links to records the caller may see, as document frequencies count them:
           -- hidden records must not make an entity too common to rank (RFC 8.1.3). An
           -- entity with more than link_scan links in a direction is a hub, too common
           -- however few of them the caller sees: counting those would read every link
           SELECT CASE WHEN (SELECT count(*) FROM (
                                    SELECT 1 FROM relations l WHERE l.target_id = m.entity_id
                                     LIMIT %(link_scan)s + 1) h) > %(link_scan)s
                         OR (SELECT count(*) FROM (
                                    SELECT 1 FROM relations l WHERE l.source_id = m.entity_id
                                     LIMIT %(link_scan)s + 1) h) > %(link_scan)s
                       THEN greatest(%(link_scan)s, %(fanout)s) + 1
                  ELSE (SELECT count(*) FROM (
                               SELECT 1 FROM relations l JOIN memory_records x ON x.id = l.source_id
                                WHERE l.target_id = m.entity_id
                                  AND (%(all_scopes)s OR x.scope = ANY(%(scopes)s::text[]))
                                  AND x.sensitivity_rank <= %(max_rank)s + 1 AND x.status <> 'retracted'
                                LIMIT %(fanout)s + 1) a)
                     + (SELECT count(*) FROM (
                               SELECT 1 FROM relations l JOIN memory_records x ON x.id = l.target_id
                                WHERE l.source_id = m.entity_id
                                  AND (%(all_scopes)s OR x.scope = ANY(%(scopes)s::text[]))
                                  AND x.sensitivity_rank <= %(max_rank)s + 1 AND x.status <> 'retracted'
                                LIMIT %(fanout)s + 1) b) END AS links
           OFFSET 0) c  -- counted once, not once per use of links (as idf's df)
     WHERE (%(all_scopes)s OR r.scope = ANY(%(scopes)s::text[]))
       AND r.sensitivity_rank <= %(max_rank)s
       AND (%(as_of)s::timestamptz IS NULL OR r.recorded_at <= %(as_of)s::timestamptz)
       AND (%(include_retracted)s
            OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz) <> 'retracted')
       AND c.links <= %(fanout)s
     LIMIT 64
), ent AS MATERIALIZED (
    -- the entities and the records linked to them (either direction), scored by entity idf
    SELECT x.id, sum(x.idf) AS score
      FROM (SELECT m.entity_id AS id, m.idf FROM ent_match m
            UNION ALL
            -- the links as of the read's as_of (RFC 5.6)
            SELECT l.source_id, m.idf FROM ent_match m JOIN relations l ON l.target_id = m.entity_id
             WHERE %(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz
            UNION ALL
            SELECT l.target_id, m.idf FROM ent_match m JOIN relations l ON l.source_id = m.entity_id
             WHERE %(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz) x
      JOIN memory_records r ON r.id = x.id
     WHERE true
       AND (%(all_scopes)s OR r.scope = ANY(%(scopes)s::text[]))
       AND /*@request_filters*/
     GROUP BY x.id
     ORDER BY score DESC, x.id
     LIMIT %(arm_k)s
)/*?!has_query*/, sal_groups AS MATERIALIZED (
    -- without a query, salience alone proposes candidates (RFC 8.1.4), read in index order
    -- rather than computed for every record of the scope. Here: the (scope, half-life)
    -- groups of the caller's unpinned records, one probe of memory_records_decay each
    SELECT s.scope, h.half_life
      FROM unnest(%(scopes)s::text[]) AS s(scope)
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
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
), sal_first AS MATERIALIZED (
    -- the best arm_k that pass the filters by each order an index holds: decay_key within
    -- each group (the order of decayed salience), the floor, and pinned records' base. UNION:
    -- a record with a floor is found by two orders and must count once toward the bar
    SELECT c.id, c.cur FROM sal_groups g CROSS JOIN LATERAL (
           SELECT r.id, current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                         r.min_salience, r.pinned, %(now)s) AS cur
             FROM memory_records r
            WHERE r.scope = g.scope AND NOT r.pinned AND r.half_life_seconds = g.half_life
              AND /*@request_filters*/
            ORDER BY decay_key(r.base_salience, r.reinforced_at, r.half_life_seconds) DESC
            LIMIT %(arm_k)s) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
    UNION
    SELECT c.id, c.cur
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN LATERAL (
           SELECT r.id, current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                         r.min_salience, r.pinned, %(now)s) AS cur
             FROM memory_records r
            WHERE r.scope = s.scope AND NOT r.pinned AND r.min_salience > 0
              AND /*@request_filters*/
            ORDER BY least(r.base_salience, r.min_salience) DESC
            LIMIT %(arm_k)s) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
    UNION
    SELECT c.id, c.cur
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN LATERAL (
           SELECT r.id, r.base_salience AS cur
             FROM memory_records r
            WHERE r.scope = s.scope AND r.pinned
              AND /*@request_filters*/
            ORDER BY r.base_salience DESC
            LIMIT %(arm_k)s) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
), sal_bar AS (
    -- the arm_k-th best current salience among them (none: no bar). A record's current
    -- salience is at most the larger of its floor and 2^(decay_key - now / half_life)
    -- (equal unless reinforced_at is in the future, where it is base), so every record at
    -- or above the bar is within one of the three ranges below: ties included, exact
    SELECT coalesce((SELECT f.cur FROM sal_first f ORDER BY f.cur DESC
                      LIMIT 1 OFFSET %(arm_k)s - 1), '-Infinity'::float8) AS c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
), sal_cand AS MATERIALIZED (
    SELECT c.id FROM sal_groups g CROSS JOIN sal_bar b CROSS JOIN LATERAL (
           -- log2(bar) + now / half_life, less a margin for rounding (more rows, never fewer)
           SELECT CASE WHEN b.c > 0 THEN y.k - 1e-9 * (1.0 + abs(y.k)) ELSE '-Infinity'::float8 END AS k
             FROM (SELECT ln(greatest(b.c, 1e-300)) / ln(2.0::float8)
                          + extract(epoch FROM %(now)s::timestamptz)::float8 / g.half_life AS k) y) x
     CROSS JOIN LATERAL (
           -- OFFSET 0 keeps this a range scan of memory_records_decay per group
           SELECT r.id FROM memory_records r
            WHERE r.scope = g.scope AND NOT r.pinned AND r.half_life_seconds = g.half_life
              AND decay_key(r.base_salience, r.reinforced_at, r.half_life_seconds) >= x.k
              AND /*@request_filters*/
           OFFSET 0) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
    UNION
    SELECT r.id
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN sal_bar b
      JOIN memory_records r ON r.scope = s.scope
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
       AND NOT r.pinned AND r.min_salience > 0 AND least(r.base_salience, r.min_salience) > b.c
       AND /*@request_filters*/
    UNION
    -- records whose floor is the bar tie with it (a store decayed to its floors): the final
    -- order breaks ties by recency, so the most recent arm_k of them are enough
    SELECT c.id
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN sal_bar b
     CROSS JOIN LATERAL (
           SELECT r.id FROM memory_records r
            WHERE r.scope = s.scope AND NOT r.pinned AND r.min_salience > 0
              AND least(r.base_salience, r.min_salience) = b.c
              AND /*@request_filters*/
            ORDER BY least(r.base_salience, r.min_salience) DESC, r.created_at DESC, r.id
            LIMIT %(arm_k)s) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
    UNION
    SELECT r.id
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN sal_bar b
      JOIN memory_records r ON r.scope = s.scope
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
       AND r.pinned AND r.base_salience >= b.c
       AND /*@request_filters*/
), sal AS MATERIALIZED (
    SELECT x.id FROM (
           SELECT r.id FROM memory_records r
            WHERE NOT %(has_query)s AND NOT %(all_scopes)s
              AND r.id = ANY(ARRAY(SELECT c.id FROM sal_cand c))
            ORDER BY current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                      r.min_salience, r.pinned, %(now)s) DESC, r.created_at DESC, r.id
            LIMIT %(arm_k)s) x
    UNION ALL
    -- a caller that may read every scope: every record is ranked (RFC 8.1.4)
    SELECT x.id FROM (
           SELECT r.id FROM memory_records r
            WHERE NOT %(has_query)s AND %(all_scopes)s
              AND /*@request_filters*/
            ORDER BY current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                      r.min_salience, r.pinned, %(now)s) DESC, r.created_at DESC, r.id
            LIMIT %(arm_k)s) x
)/*?end*//*?has_query*/, sal AS (
    -- with a query the salience arm proposes nothing (RFC 8.1.4); left out of the text, its
    -- parts cost no executor set-up either (RFC 8.1.5)
    SELECT NULL::uuid AS id WHERE false
)/*?end*/, pool AS (
    SELECT id FROM vec UNION SELECT id FROM fts UNION SELECT id FROM ent UNION SELECT id FROM sal
), feat AS MATERIALIZED (
    -- every candidate with every feature the arms can give it (RFC 8.1)
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz) AS status,
           -- a stored zero vector (no direction) is NaN away from everything: no score, as
           -- without a vector (NaN would poison every fused score, RFC 8.1.1)
           nullif(1.0 - coalesce(v.dist, (SELECT e.embedding <=> %(qvec)s::vector
                                            FROM %(embeddings)s e
                                           WHERE e.scope = r.scope AND e.record_id = r.id
                                             AND %(has_qvec)s)), 'NaN'::float8)
               AS vector_score,
           CASE WHEN r.search_tsv @@ qq.tsq THEN
                (SELECT sum(i.idf) FROM idf i WHERE r.search_tsv @@ i.tsq) * 2.2
                / (1.0 + 1.2 * (0.9 + 0.1 * (length(r.search_tsv) - 1) / greatest(a.v, 1.0))) END AS text_score,
           n.score AS entity_score,
           current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                            r.pinned, %(now)s) AS salience,
           (v.id IS NOT NULL) AS in_vector, (f.id IS NOT NULL) AS in_text, (n.id IS NOT NULL) AS in_entity,
           -- RFC 8.3: projected bytes; a redacted view counts 256
           CASE WHEN r.sensitivity_rank > %(max_rank)s THEN 256 ELSE r.projected_bytes END AS bytes
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
           greatest(stddev_pop(y.salience) OVER (), %(sd_floor_salience)s) AS ss,
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
           m.created_at, m.bytes,
           CASE WHEN %(rrf)s THEN
                coalesce(%(w_vector)s / (%(rrf_k)s + CASE WHEN m.rv IS NOT NULL THEN m.kv END), 0)
              + coalesce(%(w_text)s / (%(rrf_k)s + CASE WHEN m.rt IS NOT NULL THEN m.kt END), 0)
              + coalesce(%(w_entity)s / (%(rrf_k)s + CASE WHEN m.re IS NOT NULL THEN m.ke END), 0)
              + coalesce(%(w_salience)s / (%(rrf_k)s + CASE WHEN m.rs IS NOT NULL THEN m.ks END), 0)
           ELSE
                CASE WHEN m.sv > 1e-12 THEN %(w_vector)s * (m.fv - m.mv) / m.sv ELSE 0 END
              + CASE WHEN m.st > 1e-12 THEN %(w_text)s * (m.ft - m.mt) / m.st ELSE 0 END
              + CASE WHEN m.se > 1e-12 THEN %(w_entity)s * (m.fe - m.me) / m.se ELSE 0 END
              + CASE WHEN m.ss > 1e-12 THEN %(w_salience)s * (m.salience - m.ms) / m.ss ELSE 0 END
           END AS score,
           count(*) OVER () AS pool_size,
           count(*) FILTER (WHERE m.in_vector) OVER () AS n_vector,
           count(*) FILTER (WHERE m.in_text) OVER () AS n_text,
           count(*) FILTER (WHERE m.in_entity) OVER () AS n_entity
      FROM moments m
), ranked AS (
    -- RFC 8.2, 5.1: every active record above every contested one, then the fused score;
    -- ties by salience, recency, id
    SELECT s.*, row_number() OVER (ORDER BY s.status <> 'active', s.score DESC, s.salience DESC,
                                            s.created_at DESC, s.id) AS ord
      FROM scored s
), bounded AS (
    -- RFC 8.3: cut at the row cap and the running projected bytes before hydrating
    SELECT k.*, sum(k.bytes) OVER (ORDER BY k.ord) AS running
      FROM ranked k
     WHERE k.ord <= %(limit)s
)/*?hop*/, f AS (
    -- RFC 8.4: with expansion (the hop part, written in), its first hop runs here, from the
    -- roots that fit and are shown in full; the service uses it when it keeps exactly these
    SELECT b.id FROM bounded b JOIN memory_records r ON r.id = b.id
     WHERE b.running <= %(max_bytes)s AND r.sensitivity_rank <= %(max_rank)s
), hop_expanded AS (
    SELECT NULL::uuid AS id WHERE false
), hop_known AS (
    SELECT b.id FROM bounded b WHERE b.running <= %(max_bytes)s
), hop_budget AS (
    SELECT %(max_bytes)s::bigint AS v
), /*@hop_ctes*//*?end*/
SELECT 'root' AS kind, b.ord, b.bytes, b.running, (b.running <= %(max_bytes)s) AS fits, b.score,
       b.status AS status_as_of, b.vector_score, b.text_score, b.entity_score,
       b.salience AS salience_now, b.pool_size, b.n_vector, b.n_text, b.n_entity,
       NULL AS source_id, NULL AS predicate, NULL AS target_id, NULL AS other,
       NULL AS other_scope, NULL AS other_sensitivity, NULL AS other_status, NULL AS n,
       NULL AS hydrated,
       /*@record_fields*/,
       /*@visible_relations*/ AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= %(max_bytes)s
  LEFT JOIN record_payloads p ON p.record_id = r.id
/*?hop*/UNION ALL
SELECT 'hop', NULL, h.bytes, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, /*@hop_columns*/
  /*@hop_from*/
/*?end*/ ORDER BY kind DESC, ord, n

-- name: retrieval_bounded_hydrate
-- Cut ranked ids by rows and running projected bytes in SQL, hydrate only what fits; relations only to fully visible targets (RFC 8.3, 2.5).
WITH wanted AS (
    SELECT u.id, u.ord FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS u(id, ord)
     WHERE u.ord <= %(limit)s
), sized AS (
    SELECT w.id, w.ord,
           CASE WHEN r.sensitivity_rank > %(max_rank)s THEN 256 ELSE r.projected_bytes END AS bytes
      FROM wanted w JOIN memory_records r ON r.id = w.id
), bounded AS (
    SELECT id, ord, bytes, sum(bytes) OVER (ORDER BY ord) AS running FROM sized
)
SELECT b.ord, b.bytes, b.running, (b.running <= %(max_bytes)s) AS fits,
       /*@record_fields*/,
       /*@visible_relations*/ AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= %(max_bytes)s
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord

-- name: retrieval_graph_hop
-- One breadth-first hop over relations in both directions, neighbours trust- and status-filtered, and the new neighbours hydrated under the remaining byte budget (RFC 8.4, 8.3).
WITH f AS (
    SELECT DISTINCT unnest(%(frontier)s::uuid[]) AS id
), hop_expanded AS (
    SELECT unnest(%(expanded)s::uuid[]) AS id
), hop_known AS (
    SELECT unnest(%(known)s::uuid[]) AS id
), hop_budget AS (
    SELECT %(hop_bytes)s::bigint AS v
), /*@hop_ctes*/
SELECT h.bytes, /*@hop_columns*/
  /*@hop_from*/
 ORDER BY h.n

-- name: hop_ctes
-- Fragment (/*@hop_ctes*/): one hop from the frontier f, skipping nodes in hop_expanded, hydrating new nodes (not in hop_known) within hop_budget; hop_rows, hop_edges, hop_new bound it (RFC 8.4).
e AS (
    -- at most hop_rows edges per frontier node and direction, so a hub costs no more; the
    -- far end passes the filters (and is not a node expanded before) ahead of that cut, so
    -- that edges the caller may not follow never crowd out one it may (RFC 8.4). A relation
    -- is followed only to a record shown in full: a view omits the others (RFC 2.5)
    SELECT o.* FROM f, LATERAL (
           SELECT l.source_id, l.predicate, l.target_id, l.target_id AS other, l.weight,
                  l.created_at, r.scope, r.sensitivity, r.status, r.retracted_at,
                  r.contested_at, r.projected_bytes
             FROM relations l JOIN memory_records r ON r.id = l.target_id
            WHERE l.source_id = f.id
              AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
              AND NOT EXISTS (SELECT 1 FROM hop_expanded x WHERE x.id = l.target_id)
              AND (%(all_scopes)s OR r.scope = ANY(%(scopes)s::text[]))
              AND r.sensitivity_rank <= %(max_rank)s AND /*@neighbour_filters*/
            ORDER BY l.predicate, l.target_id LIMIT %(hop_rows)s) o
    UNION ALL
    SELECT i.* FROM f, LATERAL (
           SELECT l.source_id, l.predicate, l.target_id, l.source_id AS other, l.weight,
                  l.created_at, r.scope, r.sensitivity, r.status, r.retracted_at,
                  r.contested_at, r.projected_bytes
             FROM relations l JOIN memory_records r ON r.id = l.source_id
            WHERE l.target_id = f.id
              AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
              AND NOT EXISTS (SELECT 1 FROM hop_expanded x WHERE x.id = l.source_id)
              AND (%(all_scopes)s OR r.scope = ANY(%(scopes)s::text[]))
              AND r.sensitivity_rank <= %(max_rank)s AND /*@neighbour_filters*/
            LIMIT %(hop_rows)s) i
), hop AS MATERIALIZED (
    SELECT e.source_id, e.predicate, e.target_id, e.other, e.scope, e.sensitivity,
           status_at(e.status, e.retracted_at, e.contested_at, %(as_of)s::timestamptz) AS status,
           e.projected_bytes AS bytes,
           row_number() OVER (ORDER BY coalesce(e.weight, 0) DESC, e.created_at, e.source_id,
                                       e.predicate, e.target_id) AS n
      FROM e
     ORDER BY n
     LIMIT %(hop_rows)s
), edges AS (
    -- each edge once (a relation between two frontier nodes is found from both ends), at most
    -- hop_edges of them: the edges the expansion will take, in its order
    SELECT * FROM (SELECT DISTINCT ON (h.source_id, h.predicate, h.target_id) h.*
                     FROM hop h ORDER BY h.source_id, h.predicate, h.target_id, h.n) d
     ORDER BY d.n
     LIMIT %(hop_edges)s
), fresh AS (
    -- the neighbours these edges discover, in discovery order, up to hop_new, with the
    -- running projected bytes: the rows worth hydrating now (RFC 8.3)
    SELECT x.other, x.n, sum(x.bytes) OVER (ORDER BY x.n) AS running
      FROM (SELECT DISTINCT ON (d.other) d.other, d.n, d.bytes
              FROM edges d WHERE NOT EXISTS (SELECT 1 FROM hop_known k WHERE k.id = d.other)
             ORDER BY d.other, d.n) x
     ORDER BY x.n
     LIMIT %(hop_new)s
)

-- name: hop_columns
-- Fragment (/*@hop_columns*/): a hop row: the edge, the neighbour's scope, sensitivity and status, the row's order, and the neighbour hydrated when the hop hydrated it (RFC 8.4).
h.source_id, h.predicate, h.target_id, h.other, h.scope AS other_scope,
h.sensitivity AS other_sensitivity, h.status AS other_status, h.n,
(x.id IS NOT NULL) AS hydrated, x.*

-- name: hop_from
-- Fragment (/*@hop_from*/): the hop's rows, each new neighbour joined to its record where it fits hop_budget (RFC 8.4, 8.3).
FROM hop h
LEFT JOIN fresh w ON w.n = h.n AND w.running <= (SELECT v FROM hop_budget)
LEFT JOIN LATERAL (
      -- the neighbour's columns only on the rows that hydrate it: the subqueries among them
      -- (tags, provenance, relations) run for those rows alone, not for every edge
      SELECT /*@record_fields*/, /*@visible_relations*/ AS relations
        FROM memory_records r LEFT JOIN record_payloads p ON p.record_id = r.id
       WHERE r.id = w.other
      OFFSET 0) x ON true

-- name: embedding_partition
-- The partition of record_embeddings that holds a scope's rows: the one whose hash bound the scope satisfies (RFC 13.2).
SELECT c.relname
  FROM pg_inherits i
  JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'record_embeddings'::regclass
   AND satisfies_hash_partition('record_embeddings'::regclass,
         substring(pg_get_expr(c.relpartbound, c.oid) FROM 'modulus (\d+)')::int,
         substring(pg_get_expr(c.relpartbound, c.oid) FROM 'remainder (\d+)')::int,
         %(scope)s::text)

-- name: retrieval_access
-- Scope, sensitivity and status (as of a time) of records by id, for trust checks (RFC 7.3).
SELECT id, scope, sensitivity,
       status_at(status, retracted_at, contested_at, %(as_of)s::timestamptz) AS status
  FROM memory_records WHERE id = ANY(%(ids)s::uuid[])

-- name: visible_relations
-- Fragment (/*@visible_relations*/): the outgoing relations of r to records the read filter shows in full, made by as_of when the read has one, with the target's scope and sensitivity for the check in Python (RFC 2.5, 5.6); an ARRAY subquery, as record_fields' lists.
to_jsonb(ARRAY(SELECT jsonb_build_object('predicate', l.predicate, 'target_id', l.target_id,
                                         'weight', l.weight, 'target_scope', x.scope,
                                         'target_sensitivity', x.sensitivity)
                 FROM relations l JOIN memory_records x ON x.id = l.target_id
                WHERE l.source_id = r.id
                  AND (%(all_scopes)s OR x.scope = ANY(%(scopes)s::text[]))
                  AND x.sensitivity_rank <= %(max_rank)s
                  AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id))

-- name: match_scoped
-- Fragment (/*@match_scoped*/): the tsvector of record r that a full-text match in the caller's scopes reads: for a few scopes (`scoped`, written in) its scoped lexemes (their GIN index, RFC 8.1.2), else its own lexemes (with the scope lexeme).
/*?scoped*/scoped_lexemes(r.scope, r.search_tsv)/*?end*//*?!scoped*/r.search_tsv/*?end*/

-- name: neighbour_filters
-- Fragment (/*@neighbour_filters*/): the predicates on record r that hold at every hop (RFC 8.4): sensitivity at most one level above the caller's maximum, transaction and valid time, status.
r.sensitivity_rank <= %(max_rank)s + 1
AND (%(as_of)s::timestamptz IS NULL OR r.recorded_at <= %(as_of)s::timestamptz)
AND (%(valid_at)s::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= %(valid_at)s::timestamptz)
         AND (r.valid_to IS NULL OR %(valid_at)s::timestamptz < r.valid_to)))
AND (%(include_retracted)s
     OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz) <> 'retracted')
AND (%(include_contested)s
     OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz) <> 'contested')

-- name: counted_filters
-- Fragment (/*@counted_filters*/): whether record r counts in a full-text read's document frequencies: recorded by as_of and, unless the read asks for retracted records, not retracted as of then, so a read as of a time (or of retracted records) ranks by the corpus it reads (RFC 8.1.2, 5.6).
(%(as_of)s::timestamptz IS NULL OR r.recorded_at <= %(as_of)s::timestamptz)
AND (%(include_retracted)s
     OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz) <> 'retracted')

-- name: request_filters
-- Fragment (/*@request_filters*/): a request's predicates on record r: those of every hop (neighbour_filters), and the types, tags and salience floor that apply to roots (RFC 8.1).
/*@neighbour_filters*/
AND (%(types)s::text[] IS NULL OR r.type = ANY(%(types)s::text[]))
AND (%(tags)s::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY(%(tags)s::text[])))
AND (NOT %(salience_floor)s OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, %(now)s) >= %(min_salience)s)
