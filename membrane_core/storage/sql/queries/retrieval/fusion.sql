-- The pool, features and fused score of retrieval_roots (RFC 8.1, 8.2); the score formulas the arms share.

-- name: fusion
-- Fragment (/*@fusion*/): the pool of every arm's candidates, each with every feature the arms can give it, and one fused score (RFC 8.1, 8.2); CTEs of retrieval_roots; the statement closes the last.
pool AS (
    SELECT id FROM vec UNION SELECT id FROM fts UNION SELECT id FROM ent UNION SELECT id FROM sal
), feat AS MATERIALIZED (
    -- every candidate with every feature the arms can give it (RFC 8.1)
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) AS status,
           -- a stored zero vector (no direction) is NaN away from everything: no score, as
           -- without a vector (NaN would poison every fused score, RFC 8.1.1)
           nullif(1.0 - coalesce(v.dist, (SELECT e.embedding <=> %(qvec)s::vector
                                            FROM %(embeddings)s e
                                           WHERE e.scope = r.scope AND e.record_id = r.id
                                             AND %(has_qvec)s)), 'NaN'::float8)
               AS vector_score,
           CASE WHEN r.search_tsv @@ qq.tsq THEN
                (SELECT sum(i.idf) FROM idf i WHERE r.search_tsv @@ i.tsq) /*@bm25_numerator*/
                /*@bm25_denominator((length(r.search_tsv) - 1))*/ END AS text_score,
           n.score AS entity_score,
           current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                            r.pinned, %(now)s) AS salience,
           (v.id IS NOT NULL) AS in_vector, (f.id IS NOT NULL) AS in_text, (n.id IS NOT NULL) AS in_entity,
           (r.type = 'semantic') AS is_semantic,
           -- RFC 8.2.2: it happened on a day or in a month the query names
           EXISTS (SELECT 1 FROM unnest(%(when_from)s::timestamptz[], %(when_to)s::timestamptz[]) AS w(a, b)
                    WHERE r.occurred_at >= w.a AND r.occurred_at < w.b) AS in_when,
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
           m.created_at, m.bytes, m.is_semantic,
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
              -- a fact outranks the episodes that state it on equal evidence
              + CASE WHEN m.is_semantic THEN %(semantic_prior)s ELSE 0 END
              -- a question naming a day or month asks about what happened then (RFC 8.2.2)
              + CASE WHEN m.in_when THEN %(when_prior)s ELSE 0 END
           END AS score,
           count(*) OVER () AS pool_size,
           count(*) FILTER (WHERE m.in_vector) OVER () AS n_vector,
           count(*) FILTER (WHERE m.in_text) OVER () AS n_text,
           count(*) FILTER (WHERE m.in_entity) OVER () AS n_entity
      FROM moments m

-- name: bm25_numerator
-- Fragment (/*@bm25_numerator*/): BM25's k1 + 1 (k1 = 1.2) for term frequency 1, the factor after a row's idf sum; bm25_denominator follows it (RFC 8.1.2).
* 2.2

-- name: bm25_denominator
-- Fragment (/*@bm25_denominator(<dl>)*/): BM25's length normalisation with term frequency 1, k1 = 1.2 and b = 0.1, for a row of length dl (the argument) against avgdl a.v (RFC 8.1.2).
/ (1.0 + 1.2 * (0.9 + 0.1 * /*=*/ / greatest(a.v, 1.0)))

-- name: idf_grid
-- Fragment (/*@idf_grid(<idf>)*/): an idf (the argument) rounded to a grid of 2^-32, where a sum of up to 32 of them is exact in double precision, so a row's score is the same to the last bit in whatever order a plan adds it and equal scores tie (RFC 8.1.2, 8.1.3).
round(/*=*/ * 4294967296.0) / 4294967296.0
