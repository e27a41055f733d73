-- name: drv_lock_sources
-- Scope, sensitivity and status of source records, locked against change while deriving (RFC 7.4).
SELECT id, scope, sensitivity, status FROM memory_records
 WHERE id = ANY(%(ids)s::uuid[])
 FOR SHARE

-- name: drv_linked_sources
-- Which (fact, source) pairs are already linked derived_from, so a source reinforces a fact once (RFC 6.2).
SELECT source_id, target_id FROM relations
 WHERE predicate = 'derived_from' AND source_id = ANY(%(facts)s::uuid[])
   AND target_id = ANY(%(sources)s::uuid[])

-- name: emb_texts
-- The indexed text of records to embed (RFC 12.1), and a sealed record's ciphertext, whose indexed text is empty (RFC 7.6).
SELECT r.id, r.search_text, p.sealed
  FROM memory_records r LEFT JOIN record_payloads p ON p.record_id = r.id
 WHERE r.id = ANY(%(ids)s::uuid[])

-- name: emb_upsert
-- Write vectors, and their token signs where given, in one statement for records that still exist; a re-embedding replaces both (RFC 12.1, 8.2.3).
-- The scope comes from the record: record_embeddings is partitioned by it (RFC 13.2).
INSERT INTO record_embeddings (record_id, scope, model, embedding, created_at, token_signs)
SELECT u.id, m.scope, %(model)s, u.v::vector, %(now)s, u.signs
  FROM unnest(%(ids)s::uuid[], %(vecs)s::text[], %(signs)s::bytea[]) AS u(id, v, signs)
  JOIN memory_records m ON m.id = u.id
ON CONFLICT (scope, record_id) DO UPDATE
   SET model = EXCLUDED.model, embedding = EXCLUDED.embedding, created_at = EXCLUDED.created_at,
       token_signs = EXCLUDED.token_signs

-- name: emb_enqueue_stale
-- One chunk of embedding again: the next records by id after a cursor, and an embed item for each one with text whose vector is missing, from another model, without the token signs the provider gives, or out of line where it could be in the row (or every one with text, when all is set); returns the cursor's next position (RFC 12.5, 9.3).
WITH scanned AS (
    SELECT r.id, r.scope, r.status, r.search_text FROM memory_records r
     WHERE %(after)s::uuid IS NULL OR r.id > %(after)s::uuid
     ORDER BY r.id
     LIMIT %(limit)s
), wanted AS (
    SELECT s.id FROM scanned s
      LEFT JOIN record_payloads p ON p.record_id = s.id
      LEFT JOIN record_embeddings e ON e.scope = s.scope AND e.record_id = s.id
     WHERE s.status <> 'retracted'
       AND (s.search_text <> '' OR p.sealed IS NOT NULL)
       AND (%(scopes)s::text[] IS NULL OR s.scope = ANY(%(scopes)s::text[]))
       AND (%(all)s OR e.record_id IS NULL OR e.model <> %(model)s
            OR (%(tokens)s AND e.token_signs IS NULL AND p.sealed IS NULL)
            OR (%(inline)s AND pg_column_toast_chunk_id(e.embedding) IS NOT NULL))
), /*@chunk_requeue('embed')*/

-- name: emb_progress
-- What embedding again has left: records with text and no vector, vectors from another model, vectors without the token signs the provider gives, vectors out of line that could be in the row, and the embed items pending and dead (RFC 12.5).
SELECT 'without_vector' AS what, count(*) AS n
  FROM memory_records r LEFT JOIN record_payloads p ON p.record_id = r.id
 WHERE r.status <> 'retracted' AND (r.search_text <> '' OR p.sealed IS NOT NULL)
   AND NOT EXISTS (SELECT 1 FROM record_embeddings e WHERE e.scope = r.scope AND e.record_id = r.id)
UNION ALL
SELECT 'other_model', count(*) FROM record_embeddings e WHERE e.model <> %(model)s
UNION ALL
SELECT 'without_signs', count(*)
  FROM record_embeddings e LEFT JOIN record_payloads p ON p.record_id = e.record_id
 WHERE %(tokens)s AND e.token_signs IS NULL AND p.sealed IS NULL
UNION ALL
SELECT 'out_of_line', count(*)
  FROM record_embeddings e WHERE %(inline)s AND pg_column_toast_chunk_id(e.embedding) IS NOT NULL
UNION ALL
SELECT CASE WHEN w.dead THEN 'dead' ELSE 'pending' END, count(*)
  FROM work_items w WHERE w.kind = 'embed' GROUP BY w.dead
