-- name: entity_lookup
-- For each lookup key of a batch: the best live entity in the key's scope (RFC 3.5.2).
-- A name term matches only entities at or below the capture's sensitivity rank; an
-- identifier is unique per scope and matches at any rank. Active before contested,
-- identifier before canonical before alias, then the oldest.
SELECT f.i, hit.record_id, hit.match_kind
  FROM unnest(%(idx)s::int[], %(scopes)s::text[], %(namespaces)s::text[], %(terms)s::text[],
              %(ranks)s::int[]) AS f(i, scope, ns, term, rank)
 CROSS JOIN LATERAL (
    SELECT x.record_id, x.match_kind
      FROM (SELECT t.record_id,
                   CASE t.term_kind WHEN 'canonical' THEN 1 ELSE 2 END AS match_kind
              FROM entity_terms t
             WHERE f.ns IS NULL AND t.scope = f.scope AND t.term = f.term
            UNION ALL
            SELECT d.record_id, 0
              FROM entity_identifiers d
             WHERE f.ns IS NOT NULL AND d.scope = f.scope AND d.namespace = f.ns
               AND d.value = f.term) x
      JOIN memory_records r ON r.id = x.record_id
     WHERE r.type = 'entity' AND r.status <> 'retracted'
       AND (f.ns IS NOT NULL OR r.sensitivity_rank <= f.rank)
     ORDER BY (r.status = 'active') DESC, x.match_kind, r.created_at, r.id
     LIMIT 1) hit

-- name: lock_entity_keys
-- Serialise every creator of the same scope/term or scope/identifier, in key order (RFC 3.5.5).
SELECT pg_advisory_xact_lock(k) FROM (
    SELECT DISTINCT hashtextextended(s || chr(31) || coalesce(ns, '') || chr(31) || t, 3517) AS k
      FROM unnest(%(scopes)s::text[], %(namespaces)s::text[], %(terms)s::text[]) AS f(s, ns, t)
     ORDER BY 1) keys

-- name: copy_entity_terms
-- Bulk insert of the canonical name and aliases of new entities (RFC 3.5.2).
COPY entity_terms (record_id, scope, term, term_kind) FROM STDIN (FORMAT BINARY)

-- name: insert_entity_identifiers
-- The namespaced identifiers of new entities (RFC 3.5.2). An identifier unique in its scope that a retracted entity holds (a rejected proposal's, RFC 5.7, or one retracted by a revision) passes to the new entity: the lookup finds only live ones, so without this the new entity could never take it.
INSERT INTO entity_identifiers (record_id, scope, namespace, value)
SELECT * FROM unnest(%(ids)s::uuid[], %(scopes)s::text[], %(namespaces)s::text[], %(values)s::text[])
ON CONFLICT (scope, namespace, value) DO UPDATE SET record_id = EXCLUDED.record_id
 WHERE EXISTS (SELECT 1 FROM memory_records r
                WHERE r.id = entity_identifiers.record_id AND r.status = 'retracted')

-- name: insert_entity_relations
-- Typed edges between entities from observations, only where both entities are at least as sensitive as the observation; existing edges kept (RFC 3.5.4, 7.4).
INSERT INTO relations (source_id, predicate, target_id, created_at)
SELECT s, p, t, %(now)s
  FROM unnest(%(sources)s::uuid[], %(predicates)s::text[], %(targets)s::uuid[],
              %(ranks)s::int[]) AS e(s, p, t, rank)
 WHERE EXISTS (SELECT 1 FROM memory_records r WHERE r.id = e.s AND r.sensitivity_rank >= e.rank)
   AND EXISTS (SELECT 1 FROM memory_records r WHERE r.id = e.t AND r.sensitivity_rank >= e.rank)
ON CONFLICT (source_id, predicate, target_id) DO NOTHING
