-- The vector arm of retrieval_roots (RFC 8.1.1), and the partition a one-scope read names (13.2).

-- name: vector_tagged
-- Fragment (/*@vector_tagged*/): with a tag filter (the has_tags part), the tagged records the request may return, which the vector arm ranks exactly when they are few (RFC 8.1.1); CTEs of retrieval_roots; the statement closes the last.
tagged AS MATERIALIZED (
    -- with a tag filter, the tagged records (up to tag_cap + 1): when there are at most
    -- tag_cap, the vector arm ranks them exactly, instead of walking the HNSW graph for
    -- matches that may be rare or absent (RFC 8.1.1)
    SELECT DISTINCT t.record_id FROM record_tags t
      JOIN memory_records r ON r.id = t.record_id
     WHERE t.tag = ANY(%(tags)s::text[])
       -- only what the request may return is counted: records it may not see must not
       -- decide how the arm ranks (RFC 8.1.1)
       AND (/*@in_scopes(r.scope)*/)
       AND /*@request_filters*/
     LIMIT %(tag_cap)s + 1
), few_tagged AS (
    SELECT count(*) <= %(tag_cap)s AS yes FROM tagged

-- name: vector_arm
-- Fragment (/*@vector_arm*/): the vector arm: one HNSW search per scope, or the few tagged records ranked exactly, the best vec_k by distance (RFC 8.1.1, 13.2); CTEs of retrieval_roots; the statement closes the last.
vec AS MATERIALIZED (
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
                WHERE /*@scope_per_search*/
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
