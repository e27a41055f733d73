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
