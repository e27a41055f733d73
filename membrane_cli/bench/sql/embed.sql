-- name: bench_emb_stage
-- A session-local table for vectors written by COPY: the embedding benchmark's measured alternative to the pool's one statement (RFC 14.1).
CREATE TEMP TABLE IF NOT EXISTS bench_emb_stage (id uuid NOT NULL, v vector NOT NULL, signs bytea)

-- name: bench_emb_copy
-- Vectors and token signs into the stage, in binary (RFC 14.1).
COPY bench_emb_stage (id, v, signs) FROM STDIN (FORMAT BINARY)

-- name: bench_emb_from_stage
-- The staged vectors upserted as the pool's statement upserts them, then the stage emptied (RFC 12.4, 14.1).
WITH staged AS (DELETE FROM bench_emb_stage RETURNING id, v, signs)
INSERT INTO record_embeddings (record_id, scope, model, embedding, created_at, token_signs)
SELECT s.id, m.scope, %(model)s, s.v, %(now)s, s.signs
  FROM staged s JOIN memory_records m ON m.id = s.id
ON CONFLICT (scope, record_id) DO UPDATE
   SET model = EXCLUDED.model, embedding = EXCLUDED.embedding, created_at = EXCLUDED.created_at,
       token_signs = EXCLUDED.token_signs

-- name: bench_emb_ids
-- The ids of the records the embedding benchmark captured, in the order written (RFC 14.1).
SELECT id FROM memory_records ORDER BY created_at, id
