-- The full-text arm of retrieval_roots (RFC 8.1.2): frequencies, idf, BM25 candidates.

-- name: fulltext_frequencies
-- Fragment (/*@fulltext_frequencies*/): the full-text arm's query lexemes, the corpus size, document frequencies among what the caller may see and idf, and the query its candidates come from (RFC 8.1.2); CTEs of retrieval_roots; the statement closes the last.
qlex AS MATERIALIZED (
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
       AND /*@scope_unindexed*/
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
           /*@idf_grid(ln(1.0 + (corpus.n - d.df + 0.5) / (d.df + 0.5)))*/ AS idf
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
                           AND /*@scope_unindexed*/
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

-- name: fulltext_arm
-- Fragment (/*@fulltext_arm*/): the full-text arm: its eligible candidates, and the best arm_k of them by BM25 (RFC 8.1.2); CTEs of retrieval_roots; the statement closes the last.
fts_all AS MATERIALIZED (
    -- dl leaves out the scope lexeme. All matches seen: the eligible rows with an informative
    -- lexeme (of qq.gen), scored by every query lexeme they hold; else the rows the index finds
    -- for those lexemes (`complete` as a subquery: tested once, before the scan, RFC 8.1.5)
    SELECT h.id, min(h.dl) AS dl, sum(i.idf) AS s
      FROM hits h JOIN idf i ON i.lexeme = h.lexeme
     WHERE h.eligible
     GROUP BY h.id
    HAVING bool_or(i.df < %(df_cap)s)
        OR NOT EXISTS (SELECT 1 FROM idf x WHERE x.df < %(df_cap)s)
    UNION ALL
    (SELECT r.id, (length(r.search_tsv) - 1)::float8 AS dl,
            (SELECT sum(i.idf) FROM idf i WHERE r.search_tsv @@ i.tsq) AS s
       FROM memory_records r, qs
      WHERE NOT (SELECT c.yes FROM complete c) AND qs.gen IS NOT NULL AND /*@match_scoped*/ @@ qs.gen
        AND /*@scope_unindexed*/
        AND /*@request_filters*/
      LIMIT %(fts_cap)s)
), avgdl AS (
    SELECT coalesce(avg(dl), 1.0) AS v FROM fts_all
), fts AS MATERIALIZED (
    -- BM25 with term frequency 1 (k1 = 1.2, b = 0.1: turns and notes are short, and
    -- normalising length favours the shortest, emptiest ones)
    SELECT f.id, f.s /*@bm25_numerator*/ /*@bm25_denominator(f.dl)*/ AS score
      FROM fts_all f, avgdl a
     ORDER BY score DESC, f.id
     LIMIT %(arm_k)s
