-- Moving memories (RFC 15): export in chunks of records, a chunk's rows of each kind as JSON
-- lines in one value (nothing read row by row), and import through staging tables. A chunk is a range of the export order (scope,
-- created_at, id) after one key and up to another; every statement of a chunk reads the
-- same range with the same filters.

-- name: export_range
-- The records `r` of an export chunk (RFC 15.1): of one scope, within the range, of the asked types and creation window, up to the exporter's sensitivity rank. One scope at a time, so the listing index reads the range in order and nothing is sorted.
r.scope = %(scope)s
   AND (r.created_at, r.id) > (%(after_created)s::timestamptz, %(after_id)s::uuid)
   AND (r.created_at, r.id) <= (%(upto_created)s::timestamptz, %(upto_id)s::uuid)
   AND /*@export_filters*/

-- name: export_filters
-- The filters of an export on records `r` (RFC 15.1) beside its scopes and range.
(%(types)s::text[] IS NULL OR r.type = ANY(%(types)s::text[]))
   AND r.created_at >= coalesce(%(created_after)s::timestamptz, '-infinity')
   AND r.created_at < coalesce(%(created_before)s::timestamptz, 'infinity')
   AND r.sensitivity_rank <= %(max_rank)s

-- name: export_scopes
-- Every scope that holds a record, by a loose scan of the listing index (RFC 15.1): an export of every scope the key reads lists them first.
WITH RECURSIVE s(scope) AS (
    (SELECT m.scope FROM memory_records m ORDER BY m.scope LIMIT 1)
    UNION ALL
    SELECT (SELECT m.scope FROM memory_records m WHERE m.scope > s.scope ORDER BY m.scope LIMIT 1)
      FROM s WHERE s.scope IS NOT NULL
)
SELECT scope FROM s WHERE scope IS NOT NULL

-- name: export_counts
-- The records an export takes and those it withholds (above the exporter's sensitivity rank) in its scopes (RFC 15.1).
SELECT count(*) FILTER (WHERE r.sensitivity_rank <= %(max_rank)s) AS taken,
       count(*) FILTER (WHERE r.sensitivity_rank > %(max_rank)s) AS withheld
  FROM memory_records r
 WHERE r.scope = ANY(%(scopes)s::text[])
   AND (%(types)s::text[] IS NULL OR r.type = ANY(%(types)s::text[]))
   AND r.created_at >= coalesce(%(created_after)s::timestamptz, '-infinity')
   AND r.created_at < coalesce(%(created_before)s::timestamptz, 'infinity')

-- name: export_next_chunk
-- The last key of a scope's next chunk after a key (RFC 15.1): at most `rows` records and, past the first, at most `max_bytes` of their projected size; no row when the scope is done.
SELECT k.created_at, k.id, k.n
  FROM (SELECT r.created_at, r.id,
               row_number() OVER w AS n, sum(r.projected_bytes) OVER w AS running
          FROM memory_records r
         WHERE r.scope = %(scope)s
           AND (r.created_at, r.id) > (%(after_created)s::timestamptz, %(after_id)s::uuid)
           AND /*@export_filters*/
        WINDOW w AS (ORDER BY r.created_at, r.id)
         ORDER BY r.created_at, r.id
         LIMIT %(rows)s) k
 WHERE k.n = 1 OR k.running <= %(max_bytes)s
 ORDER BY k.n DESC
 LIMIT 1

-- name: export_records
-- A chunk's records as JSON lines (RFC 15.1): the stored columns (not the generated ones), and the payload (a sealed one as its envelope, base64). json, not jsonb: built in column order, at a third of jsonb's cost.
SELECT convert_to(string_agg(row_to_json(x)::text, E'\n'
                             ORDER BY x.scope, x.created_at, x.id) || E'\n', 'UTF8')
  FROM (SELECT r.id, r.type, r.scope, r.sensitivity, r.confidence,
               /*@stored_salience(r)*/ AS salience, r.status, r.decay_curve,
               r.half_life_seconds, r.min_salience, r.max_age_seconds, r.reinforcement_gain,
               r.base_salience, r.reinforced_at, r.pinned, r.deletion_policy, r.validity_mode,
               r.valid_from, r.valid_to, r.recorded_at, r.retracted_at, r.contested_at, r.occurred_at,
               r.created_at, r.updated_at, r.summary, r.metadata, r.fact_subject, r.fact_predicate,
               r.fact_object, r.projected_bytes, r.search_text, r.proposed_until,
               json_build_object('kind', p.kind, 'body', p.body, 'key_id', p.key_id,
                                 'sealed', translate(encode(p.sealed, 'base64'), E'\n', '')) AS payload
          FROM memory_records r JOIN record_payloads p ON p.record_id = r.id
         WHERE /*@export_range*/) x

-- name: export_tags
-- A chunk's tags as JSON lines (RFC 15.1).
SELECT convert_to(string_agg(row_to_json(t)::text, E'\n'
                             ORDER BY r.scope, r.created_at, r.id, t.tag) || E'\n', 'UTF8')
  FROM memory_records r JOIN record_tags t ON t.record_id = r.id
 WHERE /*@export_range*/

-- name: export_provenance
-- A chunk's provenance sources as JSON lines, without their store-local ids, in the order they were added (RFC 15.1).
SELECT convert_to(string_agg(json_build_object('record_id', s.record_id, 'kind', s.kind, 'ref', s.ref,
                                               'hash', s.hash, 'created_by', s.created_by, 'ts', s.ts,
                                               'added_at', s.added_at)::text, E'\n'
                             ORDER BY r.scope, r.created_at, r.id, s.id) || E'\n', 'UTF8')
  FROM memory_records r JOIN provenance_sources s ON s.record_id = r.id
 WHERE /*@export_range*/

-- name: export_relations
-- The relations a chunk's records hold, as JSON lines (RFC 15.1); the target may lie outside the export.
SELECT convert_to(string_agg(row_to_json(l)::text, E'\n'
                             ORDER BY r.scope, r.created_at, r.id, l.predicate, l.target_id) || E'\n', 'UTF8')
  FROM memory_records r JOIN relations l ON l.source_id = r.id
 WHERE /*@export_range*/

-- name: export_entity_terms
-- A chunk's entity terms as JSON lines (RFC 15.1).
SELECT convert_to(string_agg(row_to_json(e)::text, E'\n'
                             ORDER BY r.scope, r.created_at, r.id, e.term) || E'\n', 'UTF8')
  FROM memory_records r JOIN entity_terms e ON e.record_id = r.id
 WHERE /*@export_range*/

-- name: export_entity_identifiers
-- A chunk's entity identifiers as JSON lines (RFC 15.1).
SELECT convert_to(string_agg(row_to_json(i)::text, E'\n'
                             ORDER BY r.scope, r.created_at, r.id, i.namespace, i.value) || E'\n', 'UTF8')
  FROM memory_records r JOIN entity_identifiers i ON i.record_id = r.id
 WHERE /*@export_range*/

-- name: export_vectors
-- A chunk's embeddings as JSON lines (RFC 15.1): the vector as an array of numbers, the token signs base64.
SELECT convert_to(string_agg(json_build_object('record_id', e.record_id, 'scope', e.scope, 'model', e.model,
                                               'embedding', e.embedding::text::json, 'created_at', e.created_at,
                                               'token_signs', translate(encode(e.token_signs, 'base64'), E'\n', ''))::text,
                             E'\n'
                             ORDER BY r.scope, r.created_at, r.id) || E'\n', 'UTF8')
  FROM memory_records r JOIN record_embeddings e ON e.scope = r.scope AND e.record_id = r.id
 WHERE /*@export_range*/

-- name: export_proposals
-- The proposals of a chunk's proposed records, each once, and which records each holds, as JSON lines (RFC 15.1, 5.7).
SELECT convert_to(string_agg(row_to_json(o)::text, E'\n'
                             ORDER BY o.created_at, o.id) || E'\n', 'UTF8')
  FROM (SELECT p.id, p.scope, p.sensitivity, p.source, p.proposed_by, p.actors, p.corroborations, p.status,
               p.created_at, p.expires_at, p.decided_by, p.decided_at, p.rationale,
               (SELECT json_agg(x.record_id ORDER BY x.record_id) FROM proposal_records x
                 WHERE x.proposal_id = p.id) AS records
          FROM proposals p
         WHERE p.id IN (SELECT x.proposal_id FROM memory_records r JOIN proposal_records x ON x.record_id = r.id
                         WHERE /*@export_range*/)) o

-- name: export_audit
-- A chunk's audit entries as JSON lines, each record's in append order (RFC 15.1, 5.5): without store-local ids, the digests and hashes in hex.
SELECT convert_to(string_agg(/*@export_audit_line*/, E'\n'
                             ORDER BY r.scope, r.created_at, r.id, a.id) || E'\n', 'UTF8')
  FROM memory_records r JOIN audit_log a ON a.record_id = r.id
 WHERE /*@export_range*/

-- name: export_audit_line
-- One audit entry `a` as an export writes it (RFC 15.1, 5.5): without its store-local id, the digest and hashes in hex.
json_build_object('record_id', a.record_id, 'scope', a.scope, 'sensitivity', a.sensitivity,
                  'action', a.action, 'actor', a.actor, 'ts', a.ts, 'rationale', a.rationale,
                  'details', a.details, 'content_digest', encode(a.content_digest, 'hex'),
                  'prev_hash', encode(a.prev_hash, 'hex'), 'hash', encode(a.hash, 'hex'),
                  'erased_by', a.erased_by)::text

-- name: export_gone_audit
-- The audit entries of records deleted from the export's scopes (their history survives them, RFC 5.5), as export_audit writes them; an export without a type filter takes them, by the time of each record's first entry.
COPY (
SELECT /*@export_audit_line*/
  FROM (SELECT g.record_id FROM audit_log g
         WHERE g.scope = ANY(%(scopes)s::text[])
           AND NOT EXISTS (SELECT 1 FROM memory_records m WHERE m.id = g.record_id)
         GROUP BY g.record_id
        HAVING min(g.ts) >= coalesce(%(created_after)s::timestamptz, '-infinity')
           AND min(g.ts) < coalesce(%(created_before)s::timestamptz, 'infinity')
           AND max(CASE WHEN g.sensitivity = 'public' THEN 0 WHEN g.sensitivity = 'low' THEN 1
                        WHEN g.sensitivity = 'medium' THEN 2 WHEN g.sensitivity = 'high' THEN 3
                        ELSE 4 END) <= %(max_rank)s) d
  JOIN audit_log a ON a.record_id = d.record_id
 ORDER BY a.record_id, a.id
) TO STDOUT

-- name: export_tombstones
-- The fact tombstones of the export's scopes made in its creation window, as JSON lines (RFC 15.1, 5.4).
COPY (
SELECT row_to_json(t)::text
  FROM fact_tombstones t
 WHERE t.scope = ANY(%(scopes)s::text[])
   AND t.created_at >= coalesce(%(created_after)s::timestamptz, '-infinity')
   AND t.created_at < coalesce(%(created_before)s::timestamptz, 'infinity')
 ORDER BY t.scope, t.subject, t.predicate, t.object, t.sensitivity_rank
) TO STDOUT

-- name: export_erasures
-- The erasures that blanked audit entries of the export's scopes, as JSON lines (RFC 15.1, 15.4).
COPY (
SELECT json_build_object('id', e.id, 'actor', e.actor, 'reason', e.reason, 'target_kind', e.target_kind,
                         'target_digest', encode(e.target_digest, 'hex'), 'counts', e.counts,
                         'created_at', e.created_at)::text
  FROM erasures e
 WHERE e.id IN (SELECT a.erased_by FROM audit_log a
                 WHERE a.scope = ANY(%(scopes)s::text[]) AND a.erased_by IS NOT NULL)
 ORDER BY e.created_at, e.id
) TO STDOUT

-- name: export_vector_models
-- The embedding models of the export's scopes (RFC 15.1): the manifest names them when the export has vectors.
SELECT DISTINCT e.model FROM record_embeddings e WHERE e.scope = ANY(%(scopes)s::text[]) ORDER BY e.model

-- name: schema_version
-- The newest migration applied (RFC 11.1, 15.1).
SELECT coalesce(max(version), 0) FROM schema_migrations

-- name: import_staging
-- The staging tables of an import (RFC 15.2): each file's lines, in file order, dropped at commit.
CREATE TEMP TABLE import_records (n bigint GENERATED ALWAYS AS IDENTITY, doc jsonb NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE import_tags (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_provenance (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_relations (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_entity_terms (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_entity_identifiers (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_vectors (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_proposals (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_audit (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_tombstones (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_gone_audit (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_erasures (LIKE import_records INCLUDING IDENTITY) ON COMMIT DROP;
CREATE TEMP TABLE import_written (id uuid PRIMARY KEY, fresh boolean NOT NULL) ON COMMIT DROP

-- name: import_broken_chain
-- The first audit entry of an import whose link, content digest or hash does not verify (RFC 15.2, 5.5): each record's entries in file order, an erased one by its stored digest.
WITH a AS (
    SELECT 'audit' AS kind, n, doc FROM import_audit
    UNION ALL
    SELECT 'gone_audit', n, doc FROM import_gone_audit
), linked AS (
    SELECT kind, n, doc,
           lag(doc->>'hash') OVER (PARTITION BY kind, doc->>'record_id' ORDER BY n) AS prev
      FROM a
)
SELECT kind, n, doc->>'record_id' AS record_id
  FROM linked
 WHERE (doc->>'prev_hash') IS DISTINCT FROM prev
    OR (doc->>'erased_by' IS NULL
        AND encode(audit_content_digest(doc->>'rationale', doc->'details'), 'hex')
            IS DISTINCT FROM doc->>'content_digest')
    OR encode(audit_entry_hash(decode(doc->>'prev_hash', 'hex'), (doc->>'record_id')::uuid,
                               doc->>'action', doc->>'actor', (doc->>'ts')::timestamptz,
                               decode(doc->>'content_digest', 'hex')), 'hex')
       IS DISTINCT FROM doc->>'hash'
 ORDER BY kind, n
 LIMIT 1

-- name: import_conflicts
-- Records of an import whose ids the store already holds (RFC 15.2), the first few.
SELECT (i.doc->>'id')::uuid AS id
  FROM import_records i JOIN memory_records m ON m.id = (i.doc->>'id')::uuid
 ORDER BY i.n
 LIMIT %(limit)s

-- name: import_scope_moves
-- Records of an import whose ids the store holds in another scope (RFC 15.2, 13.2: a record's scope never changes), the first few, with both scopes.
SELECT m.id, m.scope AS held, i.doc->>'scope' AS offered
  FROM import_records i JOIN memory_records m ON m.id = (i.doc->>'id')::uuid
 WHERE m.scope IS DISTINCT FROM i.doc->>'scope'
 ORDER BY i.n
 LIMIT %(limit)s

-- name: import_records_skip
-- Insert an import's records the store does not hold and never erased (RFC 15.2, 15.4; on conflict skip), noting each one written.
WITH ins AS (
    INSERT INTO memory_records (id, type, scope, sensitivity, confidence, salience, status, decay_curve,
                                half_life_seconds, min_salience, max_age_seconds, reinforcement_gain,
                                base_salience, reinforced_at, pinned, deletion_policy, validity_mode,
                                valid_from, valid_to, recorded_at, retracted_at, contested_at, occurred_at,
                                created_at, updated_at, summary, metadata, fact_subject, fact_predicate,
                                fact_object, projected_bytes, search_text, proposed_until)
    SELECT /*@import_record_columns*/
      FROM import_records i, jsonb_populate_record(NULL::memory_records, i.doc) r
     WHERE NOT EXISTS (SELECT 1 FROM audit_log a WHERE a.record_id = r.id AND a.action = 'erase')
     ORDER BY i.n
    ON CONFLICT (id) DO NOTHING
    RETURNING id
)
INSERT INTO import_written (id, fresh) SELECT id, true FROM ins

-- name: import_records_overwrite
-- Insert an import's records the store never erased, and overwrite those it holds that differ (RFC 15.2, 15.4; on conflict overwrite), noting each one written and whether it is new.
WITH ins AS (
    INSERT INTO memory_records AS m (id, type, scope, sensitivity, confidence, salience, status, decay_curve,
                                half_life_seconds, min_salience, max_age_seconds, reinforcement_gain,
                                base_salience, reinforced_at, pinned, deletion_policy, validity_mode,
                                valid_from, valid_to, recorded_at, retracted_at, contested_at, occurred_at,
                                created_at, updated_at, summary, metadata, fact_subject, fact_predicate,
                                fact_object, projected_bytes, search_text, proposed_until)
    SELECT /*@import_record_columns*/
      FROM import_records i, jsonb_populate_record(NULL::memory_records, i.doc) r
     WHERE NOT EXISTS (SELECT 1 FROM audit_log a WHERE a.record_id = r.id AND a.action = 'erase')
     ORDER BY i.n
    ON CONFLICT (id) DO UPDATE SET
        type = EXCLUDED.type, scope = EXCLUDED.scope, sensitivity = EXCLUDED.sensitivity,
        confidence = EXCLUDED.confidence, salience = EXCLUDED.salience, status = EXCLUDED.status,
        decay_curve = EXCLUDED.decay_curve, half_life_seconds = EXCLUDED.half_life_seconds,
        min_salience = EXCLUDED.min_salience, max_age_seconds = EXCLUDED.max_age_seconds,
        reinforcement_gain = EXCLUDED.reinforcement_gain, base_salience = EXCLUDED.base_salience,
        reinforced_at = EXCLUDED.reinforced_at, pinned = EXCLUDED.pinned,
        deletion_policy = EXCLUDED.deletion_policy, validity_mode = EXCLUDED.validity_mode,
        valid_from = EXCLUDED.valid_from, valid_to = EXCLUDED.valid_to,
        recorded_at = EXCLUDED.recorded_at, retracted_at = EXCLUDED.retracted_at,
        contested_at = EXCLUDED.contested_at, occurred_at = EXCLUDED.occurred_at,
        created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at,
        summary = EXCLUDED.summary, metadata = EXCLUDED.metadata,
        fact_subject = EXCLUDED.fact_subject, fact_predicate = EXCLUDED.fact_predicate,
        fact_object = EXCLUDED.fact_object, projected_bytes = EXCLUDED.projected_bytes,
        search_text = EXCLUDED.search_text, proposed_until = EXCLUDED.proposed_until
     WHERE (m.type, m.scope, m.sensitivity, m.confidence, /*@stored_salience(m)*/, m.status, m.decay_curve,
            m.half_life_seconds, m.min_salience, m.max_age_seconds, m.reinforcement_gain,
            m.base_salience, m.reinforced_at, m.pinned, m.deletion_policy, m.validity_mode,
            m.valid_from, m.valid_to, m.recorded_at, m.retracted_at, m.contested_at, m.occurred_at,
            m.created_at, m.updated_at, m.summary, m.metadata, m.fact_subject, m.fact_predicate,
            m.fact_object, m.projected_bytes, m.search_text, m.proposed_until)
           IS DISTINCT FROM
           (EXCLUDED.type, EXCLUDED.scope, EXCLUDED.sensitivity, EXCLUDED.confidence,
            EXCLUDED.salience, EXCLUDED.status, EXCLUDED.decay_curve, EXCLUDED.half_life_seconds,
            EXCLUDED.min_salience, EXCLUDED.max_age_seconds, EXCLUDED.reinforcement_gain,
            EXCLUDED.base_salience, EXCLUDED.reinforced_at, EXCLUDED.pinned, EXCLUDED.deletion_policy,
            EXCLUDED.validity_mode, EXCLUDED.valid_from, EXCLUDED.valid_to, EXCLUDED.recorded_at,
            EXCLUDED.retracted_at, EXCLUDED.contested_at, EXCLUDED.occurred_at, EXCLUDED.created_at,
            EXCLUDED.updated_at, EXCLUDED.summary, EXCLUDED.metadata, EXCLUDED.fact_subject,
            EXCLUDED.fact_predicate, EXCLUDED.fact_object, EXCLUDED.projected_bytes,
            EXCLUDED.search_text, EXCLUDED.proposed_until)
    RETURNING m.id, (m.xmax = 0) AS fresh
)
INSERT INTO import_written (id, fresh) SELECT id, fresh FROM ins

-- name: import_counts_written
-- The records an import wrote: new, and overwritten (RFC 15.2).
SELECT count(*) FILTER (WHERE fresh), count(*) FILTER (WHERE NOT fresh) FROM import_written

-- name: import_record_columns
-- The stored columns of an imported record `r`, in the order import_records_* insert them (RFC 15.2).
r.id, r.type, r.scope, r.sensitivity, r.confidence, r.salience, r.status, r.decay_curve,
           r.half_life_seconds, r.min_salience, r.max_age_seconds, r.reinforcement_gain,
           r.base_salience, r.reinforced_at, r.pinned, r.deletion_policy, r.validity_mode,
           r.valid_from, r.valid_to, r.recorded_at, r.retracted_at, r.contested_at, r.occurred_at,
           r.created_at, r.updated_at, r.summary, r.metadata, r.fact_subject, r.fact_predicate,
           r.fact_object, r.projected_bytes, r.search_text, r.proposed_until

-- name: import_clear_overwritten
-- The payload, tags, provenance, relations, entity terms and identifiers, embedding, salience checkpoint and proposal link of the records an import overwrote, before it writes the bundle's (RFC 15.2).
WITH o AS (SELECT id FROM import_written WHERE NOT fresh),
     p AS (DELETE FROM record_payloads x USING o WHERE x.record_id = o.id),
     t AS (DELETE FROM record_tags x USING o WHERE x.record_id = o.id),
     s AS (DELETE FROM provenance_sources x USING o WHERE x.record_id = o.id),
     l AS (DELETE FROM relations x USING o WHERE x.source_id = o.id),
     e AS (DELETE FROM entity_terms x USING o WHERE x.record_id = o.id),
     i AS (DELETE FROM entity_identifiers x USING o WHERE x.record_id = o.id),
     v AS (DELETE FROM record_embeddings x USING o WHERE x.record_id = o.id),
     c AS (DELETE FROM salience_checkpoints x USING o WHERE x.record_id = o.id)
DELETE FROM proposal_records x USING o WHERE x.record_id = o.id

-- name: import_children
-- The payloads, tags, provenance, entity terms and identifiers of the records an import wrote, and their relations to records the store holds; rows a conflict keeps out are counted by the caller (RFC 15.2).
WITH p AS (
    INSERT INTO record_payloads (record_id, kind, body, key_id, sealed)
    SELECT w.id, i.doc->'payload'->>'kind', nullif(i.doc->'payload'->'body', 'null'::jsonb),
           i.doc->'payload'->>'key_id', decode(i.doc->'payload'->>'sealed', 'base64')
      FROM import_records i JOIN import_written w ON w.id = (i.doc->>'id')::uuid
    RETURNING 1
), t AS (
    INSERT INTO record_tags (record_id, tag)
    SELECT x.record_id, x.tag
      FROM import_tags i, jsonb_populate_record(NULL::record_tags, i.doc) x
      JOIN import_written w ON w.id = x.record_id
     ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING 1
), s AS (
    INSERT INTO provenance_sources (record_id, kind, ref, hash, created_by, ts, added_at)
    SELECT x.record_id, x.kind, x.ref, x.hash, x.created_by, x.ts, x.added_at
      FROM import_provenance i, jsonb_populate_record(NULL::provenance_sources, i.doc) x
      JOIN import_written w ON w.id = x.record_id
     ORDER BY i.n
    RETURNING 1
), e AS (
    INSERT INTO entity_terms (record_id, scope, term, term_kind)
    SELECT x.record_id, x.scope, x.term, x.term_kind
      FROM import_entity_terms i, jsonb_populate_record(NULL::entity_terms, i.doc) x
      JOIN import_written w ON w.id = x.record_id
     ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING 1
), d AS (
    INSERT INTO entity_identifiers (record_id, scope, namespace, value)
    SELECT x.record_id, x.scope, x.namespace, x.value
      FROM import_entity_identifiers i, jsonb_populate_record(NULL::entity_identifiers, i.doc) x
      JOIN import_written w ON w.id = x.record_id
     ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM p) AS payloads, (SELECT count(*) FROM t) AS tags,
       (SELECT count(*) FROM s) AS provenance, (SELECT count(*) FROM e) AS entity_terms,
       (SELECT count(*) FROM d) AS entity_identifiers,
       (SELECT count(*) FROM import_entity_identifiers i
          JOIN import_written w ON w.id = (i.doc->>'record_id')::uuid) AS identifiers_offered

-- name: import_relations
-- The relations of the records an import wrote whose targets the store holds (RFC 15.2); the rest are dangling, counted by the caller.
WITH ins AS (
    INSERT INTO relations (source_id, predicate, target_id, weight, created_at)
    SELECT x.source_id, x.predicate, x.target_id, x.weight, x.created_at
      FROM import_relations i, jsonb_populate_record(NULL::relations, i.doc) x
      JOIN import_written w ON w.id = x.source_id
     WHERE EXISTS (SELECT 1 FROM memory_records m WHERE m.id = x.target_id)
     ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM ins) AS written,
       (SELECT count(*) FROM import_relations i JOIN import_written w ON w.id = (i.doc->>'source_id')::uuid
         WHERE NOT EXISTS (SELECT 1 FROM memory_records m WHERE m.id = (i.doc->>'target_id')::uuid)) AS dangling

-- name: import_vectors
-- The embeddings of the records an import wrote, where the bundle's model and dimension are the store's (RFC 15.2).
WITH ins AS (
    INSERT INTO record_embeddings (record_id, scope, model, embedding, created_at, token_signs)
    SELECT (i.doc->>'record_id')::uuid, i.doc->>'scope', i.doc->>'model', (i.doc->>'embedding')::vector,
           (i.doc->>'created_at')::timestamptz, decode(i.doc->>'token_signs', 'base64')
      FROM import_vectors i JOIN import_written w ON w.id = (i.doc->>'record_id')::uuid
     WHERE i.doc->>'model' = %(model)s AND jsonb_array_length(i.doc->'embedding') = %(dim)s
     ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM ins

-- name: import_embed_work
-- An embed work item for each record an import wrote that has no embedding (RFC 15.2, 9.3).
WITH ins AS (
    INSERT INTO work_items (kind, target_id)
    SELECT 'embed', w.id FROM import_written w
     WHERE NOT EXISTS (SELECT 1 FROM record_embeddings e WHERE e.record_id = w.id)
    ON CONFLICT (kind, target_id) DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM ins

-- name: import_proposals
-- The proposals of the records an import wrote, and their links (RFC 15.2, 5.7).
WITH o AS (
    INSERT INTO proposals (id, scope, sensitivity, source, proposed_by, actors, corroborations, status,
                           created_at, expires_at, decided_by, decided_at, rationale)
    SELECT x.id, x.scope, x.sensitivity, x.source, x.proposed_by, x.actors, x.corroborations, x.status,
           x.created_at, x.expires_at, x.decided_by, x.decided_at, x.rationale
      FROM import_proposals i, jsonb_populate_record(NULL::proposals, i.doc) x
     WHERE EXISTS (SELECT 1 FROM jsonb_array_elements_text(i.doc->'records') r
                    JOIN import_written w ON w.id = r::uuid)
     ORDER BY i.n
    ON CONFLICT (id) DO NOTHING
    RETURNING 1
), l AS (
    INSERT INTO proposal_records (record_id, proposal_id)
    SELECT w.id, (i.doc->>'id')::uuid
      FROM import_proposals i, jsonb_array_elements_text(i.doc->'records') r
      JOIN import_written w ON w.id = r::uuid
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM o) AS proposals, (SELECT count(*) FROM l) AS links

-- name: import_tombstones
-- The fact tombstones of an import the store does not hold, but none of a fact it erased (RFC 15.2, 5.4, 15.4).
WITH ins AS (
    INSERT INTO fact_tombstones (scope, subject, predicate, object, record_id, actor, rationale, created_at,
                                 sensitivity_rank)
    SELECT x.scope, x.subject, x.predicate, x.object, x.record_id, x.actor, x.rationale, x.created_at,
           x.sensitivity_rank
      FROM import_tombstones i, jsonb_populate_record(NULL::fact_tombstones, i.doc) x
     WHERE NOT EXISTS (SELECT 1 FROM erased_facts e
                        WHERE e.scope = x.scope AND e.key_digest = fact_key_digest(x.subject, x.predicate, x.object))
     ORDER BY i.n
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM ins

-- name: import_erasures
-- The erasures an import's blanked audit entries name, unless the store holds them (RFC 15.2, 15.4).
WITH ins AS (
    INSERT INTO erasures (id, actor, reason, target_kind, target_digest, counts, created_at)
    SELECT (i.doc->>'id')::uuid, i.doc->>'actor', i.doc->>'reason', i.doc->>'target_kind',
           decode(i.doc->>'target_digest', 'hex'), i.doc->'counts', (i.doc->>'created_at')::timestamptz
      FROM import_erasures i
     ORDER BY i.n
    ON CONFLICT (id) DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM ins

-- name: import_audit
-- The audit entries of an import the store's chains lack (RFC 15.2, 5.5): a record's whole chain where the store has none of it, the rest where the store's chain is a prefix of the bundle's; returns, per record, how its chain stood (new, behind, equal, ahead, diverged) and the entries appended.
WITH a AS (
    SELECT n, doc, doc->>'record_id' AS rid FROM import_audit
    UNION ALL
    SELECT n + (SELECT coalesce(max(n), 0) FROM import_audit), doc, doc->>'record_id' FROM import_gone_audit
), b AS (
    SELECT rid, array_agg(doc->>'hash' ORDER BY n) AS hashes FROM a GROUP BY rid
), s AS (
    SELECT g.record_id::text AS rid, array_agg(encode(g.hash, 'hex') ORDER BY g.id) AS hashes
      FROM audit_log g WHERE g.record_id IN (SELECT rid::uuid FROM b)
     GROUP BY g.record_id
), st AS (
    SELECT b.rid, coalesce(cardinality(s.hashes), 0) AS have,
           CASE WHEN s.hashes IS NULL THEN 'new'
                WHEN s.hashes = b.hashes THEN 'equal'
                WHEN b.hashes[1:cardinality(s.hashes)] = s.hashes THEN 'behind'
                WHEN s.hashes[1:cardinality(b.hashes)] = b.hashes THEN 'ahead'
                ELSE 'diverged' END AS state
      FROM b LEFT JOIN s ON s.rid = b.rid
), ins AS (
    INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details,
                           content_digest, erased_by)
    SELECT (x.doc->>'record_id')::uuid, x.doc->>'scope', x.doc->>'sensitivity', x.doc->>'action',
           x.doc->>'actor', (x.doc->>'ts')::timestamptz, x.doc->>'rationale', x.doc->'details',
           decode(x.doc->>'content_digest', 'hex'), (x.doc->>'erased_by')::uuid
      FROM (SELECT a.*, row_number() OVER (PARTITION BY a.rid ORDER BY a.n) AS pos FROM a) x
      JOIN st ON st.rid = x.rid AND st.state IN ('new', 'behind') AND x.pos > st.have
     ORDER BY x.n
    RETURNING record_id, encode(hash, 'hex') AS hash
)
SELECT st.state, count(DISTINCT st.rid) AS records,
       (SELECT count(*) FROM ins) AS appended,
       (SELECT count(*) FROM ins JOIN a ON a.rid = ins.record_id::text AND a.doc->>'hash' = ins.hash) AS matched
  FROM st GROUP BY st.state

-- name: import_diverged
-- Records of an import whose audit chain in the store is not a prefix of the bundle's nor the bundle's of it (RFC 15.2), the first few.
WITH b AS (
    SELECT doc->>'record_id' AS rid, array_agg(doc->>'hash' ORDER BY n) AS hashes
      FROM (SELECT n, doc FROM import_audit UNION ALL SELECT n, doc FROM import_gone_audit) a
     GROUP BY 1
), s AS (
    SELECT g.record_id::text AS rid, array_agg(encode(g.hash, 'hex') ORDER BY g.id) AS hashes
      FROM audit_log g WHERE g.record_id IN (SELECT rid::uuid FROM b)
     GROUP BY g.record_id
)
SELECT b.rid FROM b JOIN s ON s.rid = b.rid
 WHERE b.hashes[1:cardinality(s.hashes)] <> s.hashes AND s.hashes[1:cardinality(b.hashes)] <> b.hashes
 ORDER BY b.rid
 LIMIT %(limit)s

-- name: import_overwritten_entries
-- An `import` audit entry on each record an import overwrote (RFC 15.2, 5.5).
INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details)
SELECT m.id, m.scope, m.sensitivity, 'import', %(actor)s, %(now)s, 'overwritten by an import',
       jsonb_build_object('operation', 'import', 'exported_by', %(exported_by)s::text,
                          'exported_at', %(exported_at)s::text)
  FROM import_written w JOIN memory_records m ON m.id = w.id
 WHERE NOT w.fresh
 ORDER BY m.id
