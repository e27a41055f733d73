-- name: seal_fact_keys
-- Stored fact keys of the semantic records of a seal batch, read before any row lock so advisory key locks come first (RFC 5.4, 7.6).
SELECT scope, fact_subject, fact_predicate, fact_object
  FROM memory_records
 WHERE id = ANY(%(ids)s::uuid[]) AND type = 'semantic'

-- name: seal_lock
-- The rows of a seal batch, locked in id order: what a plain record holds and a sealed one's ciphertext (RFC 7.6); NO KEY UPDATE admits the key-share locks of new relations.
SELECT r.id, r.type, r.scope, r.sensitivity_rank, r.summary, r.metadata, r.fact_subject,
       r.fact_predicate, r.fact_object, p.kind, p.body, p.key_id, p.sealed,
       ARRAY(SELECT t.tag FROM record_tags t WHERE t.record_id = r.id ORDER BY t.tag) AS tags
  FROM memory_records r
  JOIN record_payloads p ON p.record_id = r.id
 WHERE r.id = ANY(%(ids)s::uuid[])
 ORDER BY r.id
   FOR NO KEY UPDATE OF r, p

-- name: seal_write_payloads
-- The new ciphertexts of a seal batch, each naming its key; the plain body is gone (RFC 7.6).
UPDATE record_payloads p
   SET body = NULL, key_id = u.key_id, sealed = u.sealed
  FROM unnest(%(ids)s::uuid[], %(key_ids)s::text[], %(sealed)s::bytea[]) AS u(id, key_id, sealed)
 WHERE p.record_id = u.id

-- name: seal_clear_records
-- Records sealed for the first time lose what they held in plain text: summary, metadata, indexed text; a fact's key becomes blind (RFC 7.6).
UPDATE memory_records r
   SET summary = NULL, metadata = '{}'::jsonb, search_text = '',
       fact_subject = coalesce(u.subject, r.fact_subject),
       fact_predicate = coalesce(u.predicate, r.fact_predicate),
       fact_object = coalesce(u.object, r.fact_object)
  FROM unnest(%(ids)s::uuid[], %(subjects)s::text[], %(predicates)s::text[], %(objects)s::text[])
       AS u(id, subject, predicate, object)
 WHERE r.id = u.id

-- name: seal_clear_tags
-- The plain tags of records sealed for the first time (their blind values are inserted next, RFC 7.6).
DELETE FROM record_tags WHERE record_id = ANY(%(ids)s::uuid[])

-- name: seal_insert_tags
-- The blind tags of records sealed for the first time (RFC 7.6).
INSERT INTO record_tags (record_id, tag)
SELECT * FROM unnest(%(ids)s::uuid[], %(tags)s::text[])
ON CONFLICT DO NOTHING

-- name: seal_clear_token_signs
-- Records sealed for the first time lose their token signs: a token's vector tells more of its word than a text's one vector does (RFC 8.2.3, 7.6).
UPDATE record_embeddings e
   SET token_signs = NULL
  FROM unnest(%(scopes)s::text[], %(ids)s::uuid[]) AS u(scope, id)
 WHERE e.scope = u.scope AND e.record_id = u.id AND e.token_signs IS NOT NULL

-- name: seal_clear_entity_keys
-- A sealed entity is matched by no name and no identifier: its terms are plain text (RFC 7.6).
WITH terms AS (
    DELETE FROM entity_terms WHERE record_id = ANY(%(ids)s::uuid[])
)
DELETE FROM entity_identifiers WHERE record_id = ANY(%(ids)s::uuid[])

-- name: seal_enqueue
-- One chunk of rotation: the next records by id after a cursor, and a seal item for each one still to seal: sealed under another key, or plain at or above the sealed level (RFC 7.6, 9.3); returns the cursor's next position.
WITH scanned AS (
    SELECT r.id, r.sensitivity_rank FROM memory_records r
     WHERE %(after)s::uuid IS NULL OR r.id > %(after)s::uuid
     ORDER BY r.id
     LIMIT %(limit)s
), wanted AS (
    SELECT s.id FROM scanned s JOIN record_payloads p ON p.record_id = s.id
     WHERE CASE WHEN p.sealed IS NULL THEN s.sensitivity_rank >= %(rank)s
                ELSE p.key_id <> %(key_id)s END
), /*@chunk_requeue('seal')*/

-- name: seal_progress
-- What rotation has left: sealed records by key, plain records at or above the sealed level, and the seal items pending and dead (RFC 7.6).
SELECT 'key' AS what, p.key_id AS key_id, count(*) AS n
  FROM record_payloads p WHERE p.key_id IS NOT NULL GROUP BY p.key_id
UNION ALL
SELECT 'plain', NULL, count(*)
  FROM memory_records r JOIN record_payloads p ON p.record_id = r.id
 WHERE p.sealed IS NULL AND r.sensitivity_rank >= %(rank)s
UNION ALL
SELECT CASE WHEN w.dead THEN 'dead' ELSE 'pending' END, NULL, count(*)
  FROM work_items w WHERE w.kind = 'seal' GROUP BY w.dead
