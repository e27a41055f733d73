-- Erasure (RFC 15.4): the records of a target gathered into erase_targets, counted by table,
-- then their content removed from every table that holds it, in one transaction.

-- name: erase_start
-- The records an erasure takes, gathered in this transaction.
CREATE TEMP TABLE erase_targets (id uuid PRIMARY KEY) ON COMMIT DROP

-- name: erase_seed_scope
-- An erasure of a scope takes every record of it (RFC 15.4).
INSERT INTO erase_targets (id)
SELECT m.id FROM memory_records m WHERE m.scope = %(scope)s
ON CONFLICT DO NOTHING

-- name: erase_seed_entity
-- An erasure of an entity takes the entity, every record with a relation to or from it and every fact whose subject or object is one of its names, in the scopes the eraser may erase (RFC 15.4).
INSERT INTO erase_targets (id)
SELECT x.id FROM (
    SELECT %(entity)s::uuid AS id
    UNION SELECT l.source_id FROM relations l WHERE l.target_id = %(entity)s::uuid
    UNION SELECT l.target_id FROM relations l WHERE l.source_id = %(entity)s::uuid
    UNION SELECT f.id FROM entity_terms e
            JOIN memory_records f ON f.scope = e.scope AND f.type = 'semantic'
                                 AND (f.fact_subject = e.term OR f.fact_object = e.term)
           WHERE e.record_id = %(entity)s::uuid
) x JOIN memory_records m ON m.id = x.id
 WHERE (%(scopes)s::text[] IS NULL OR m.scope = ANY(%(scopes)s::text[]))
ON CONFLICT DO NOTHING

-- name: erase_seed_records
-- An erasure of records takes those of the ids the store holds in the scopes the eraser may erase (RFC 15.4).
INSERT INTO erase_targets (id)
SELECT m.id FROM memory_records m
 WHERE m.id = ANY(%(ids)s::uuid[]) AND (%(scopes)s::text[] IS NULL OR m.scope = ANY(%(scopes)s::text[]))
ON CONFLICT DO NOTHING

-- name: erase_near
-- The records next to an erasure's (RFC 15.4): the other versions of each (supersedes, superseded_by) and the records derived from it.
SELECT l.target_id AS id FROM relations l JOIN erase_targets t ON t.id = l.source_id
     WHERE l.predicate IN ('supersedes', 'superseded_by')
    UNION
    SELECT l.source_id FROM relations l JOIN erase_targets t ON t.id = l.target_id
     WHERE l.predicate IN ('supersedes', 'superseded_by', 'derived_from')

-- name: erase_spread
-- One step of an erasure's closure (RFC 15.4): the other versions of a taken record (supersedes, superseded_by) and the records derived from it, in the scopes the eraser may erase; returns how many it added.
WITH near AS (
    /*@erase_near*/
), added AS (
    INSERT INTO erase_targets (id)
    SELECT m.id FROM near n JOIN memory_records m ON m.id = n.id
     WHERE (%(scopes)s::text[] IS NULL OR m.scope = ANY(%(scopes)s::text[]))
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM added

-- name: erase_outside
-- Records an erasure's closure reaches in scopes the eraser may not erase, left as they are (RFC 15.4).
SELECT count(DISTINCT m.id)
  FROM (/*@erase_near*/) n
  JOIN memory_records m ON m.id = n.id
 WHERE NOT EXISTS (SELECT 1 FROM erase_targets t WHERE t.id = m.id)

-- name: erase_lock
-- Lock an erasure's records in id order, as revisions lock them (RFC 15.4, 5.5); the ids, in order.
SELECT m.id FROM memory_records m JOIN erase_targets t ON t.id = m.id ORDER BY m.id FOR UPDATE OF m

-- name: erase_operations
-- The operations that hold an erasure's content: those naming one of its records, and with a scope target the captures to that scope (RFC 15.4).
CREATE TEMP TABLE erase_operations ON COMMIT DROP AS
SELECT o.id FROM operations o
 WHERE o.record_id IN (SELECT id FROM erase_targets)
    OR o.target_id IN (SELECT id FROM erase_targets)
    OR EXISTS (SELECT 1 FROM unnest(o.record_ids) x JOIN erase_targets t ON t.id = x)
    OR (%(scope)s::text IS NOT NULL AND o.request->>'scope' = %(scope)s::text)

-- name: erase_counts
-- What an erasure removes, by table (RFC 15.4): rows deleted, or blanked where the row stays (audit entries, operations); fact keys kept as digests.
SELECT (SELECT count(*) FROM erase_targets) AS memory_records,
       (SELECT count(*) FROM record_payloads x JOIN erase_targets t ON t.id = x.record_id) AS record_payloads,
       (SELECT count(*) FROM record_tags x JOIN erase_targets t ON t.id = x.record_id) AS record_tags,
       (SELECT count(*) FROM provenance_sources x JOIN erase_targets t ON t.id = x.record_id) AS provenance_sources,
       (SELECT count(*) FROM relations x
         WHERE x.source_id IN (SELECT id FROM erase_targets) OR x.target_id IN (SELECT id FROM erase_targets)) AS relations,
       (SELECT count(*) FROM entity_terms x JOIN erase_targets t ON t.id = x.record_id) AS entity_terms,
       (SELECT count(*) FROM entity_identifiers x JOIN erase_targets t ON t.id = x.record_id) AS entity_identifiers,
       (SELECT count(*) FROM record_embeddings x JOIN erase_targets t ON t.id = x.record_id) AS record_embeddings,
       (SELECT count(*) FROM audit_log x JOIN erase_targets t ON t.id = x.record_id
         WHERE x.erased_by IS NULL) AS audit_log,
       (SELECT count(*) FROM erase_operations) AS operations,
       (SELECT count(*) FROM work_items x JOIN erase_targets t ON t.id = x.target_id) AS work_items,
       (SELECT count(*) FROM fact_tombstones f
         WHERE f.record_id IN (SELECT id FROM erase_targets)
            OR (%(scope)s::text IS NOT NULL AND f.scope = %(scope)s::text)
            OR EXISTS (SELECT 1 FROM memory_records m JOIN erase_targets t ON t.id = m.id
                        WHERE m.type = 'semantic' AND m.scope = f.scope AND m.fact_subject = f.subject
                          AND m.fact_predicate = f.predicate AND m.fact_object = f.object)) AS fact_tombstones,
       (SELECT count(*) FROM proposals p
         WHERE EXISTS (SELECT 1 FROM proposal_records x JOIN erase_targets t ON t.id = x.record_id
                        WHERE x.proposal_id = p.id)
           AND NOT EXISTS (SELECT 1 FROM proposal_records x WHERE x.proposal_id = p.id
                              AND x.record_id NOT IN (SELECT id FROM erase_targets))) AS proposals,
       (SELECT count(*) FROM tool_signatures s
         WHERE (%(scope)s::text IS NOT NULL AND s.scope = %(scope)s::text)
            OR EXISTS (SELECT 1 FROM unnest(s.pending_sources) x JOIN erase_targets t ON t.id = x)
            OR s.competence_id IN (SELECT id FROM erase_targets)
            OR s.plan_id IN (SELECT id FROM erase_targets)) AS tool_signatures

-- name: erase_record
-- The erasure itself, without content (RFC 15.4): who, when, why, the kind of target and its digest, the counts.
INSERT INTO erasures (id, actor, reason, target_kind, target_digest, counts, created_at)
VALUES (%(id)s, %(actor)s, %(reason)s, %(kind)s, %(digest)s, %(counts)s, %(now)s)

-- name: erase_facts
-- Keep the fact keys of an erasure's facts and tombstones as digests, then drop the tombstones that name them (RFC 15.4, 5.4).
WITH keys AS (
    SELECT m.scope, m.fact_subject AS subject, m.fact_predicate AS predicate, m.fact_object AS object
      FROM memory_records m JOIN erase_targets t ON t.id = m.id
     WHERE m.type = 'semantic'
    UNION
    SELECT f.scope, f.subject, f.predicate, f.object FROM fact_tombstones f
     WHERE f.record_id IN (SELECT id FROM erase_targets)
        OR (%(scope)s::text IS NOT NULL AND f.scope = %(scope)s::text)
), kept AS (
    INSERT INTO erased_facts (scope, key_digest, erasure_id)
    SELECT DISTINCT k.scope, fact_key_digest(k.subject, k.predicate, k.object), %(erasure)s::uuid FROM keys k
    ON CONFLICT DO NOTHING
)
DELETE FROM fact_tombstones f USING keys k
 WHERE f.scope = k.scope AND f.subject = k.subject AND f.predicate = k.predicate AND f.object = k.object

-- name: erase_audit_blank
-- Blank the rationale and details of an erasure's records' entries, naming the erasure (RFC 15.4, 5.5): the digests and hashes stay, so every chain verifies.
UPDATE audit_log a SET rationale = '', details = '{}'::jsonb, erased_by = %(erasure)s::uuid
  FROM erase_targets t
 WHERE a.record_id = t.id AND a.erased_by IS NULL

-- name: erase_audit_entries
-- A content-free `erase` entry on each of an erasure's records (RFC 15.4, 5.5).
INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details)
SELECT m.id, m.scope, m.sensitivity, 'erase', %(actor)s, %(now)s, '',
       jsonb_build_object('operation', 'erase', 'erasure', %(erasure)s::text)
  FROM memory_records m JOIN erase_targets t ON t.id = m.id
 ORDER BY m.id

-- name: erase_operations_blank
-- Blank the requests, results and errors of an erasure's operations; one not yet run fails, naming the erasure (RFC 15.4, 9.1).
UPDATE operations o
   SET request = jsonb_build_object('erased', %(erasure)s::text),
       request_hash = '',
       result = NULL,
       error = CASE WHEN o.status IN ('queued', 'running')
                    THEN jsonb_build_object('code', 'erased', 'message', 'its content was erased before it ran')
                    ELSE NULL END,
       status = CASE WHEN o.status IN ('queued', 'running') THEN 'failed' ELSE o.status END,
       finished_at = CASE WHEN o.status IN ('queued', 'running') THEN %(now)s ELSE o.finished_at END
  FROM erase_operations e
 WHERE o.id = e.id

-- name: erase_work
-- The work items of an erasure's records, whose errors may quote them (RFC 15.4).
DELETE FROM work_items x USING erase_targets t WHERE x.target_id = t.id

-- name: erase_proposals
-- The proposals an erasure leaves without records (RFC 15.4, 5.7).
DELETE FROM proposals p
 WHERE EXISTS (SELECT 1 FROM proposal_records x JOIN erase_targets t ON t.id = x.record_id
                WHERE x.proposal_id = p.id)
   AND NOT EXISTS (SELECT 1 FROM proposal_records x WHERE x.proposal_id = p.id
                      AND x.record_id NOT IN (SELECT id FROM erase_targets))

-- name: erase_signatures
-- The mining state of an erased scope, and elsewhere the names of erased records in it (RFC 15.4, 6.4.3).
WITH gone AS (
    DELETE FROM tool_signatures s WHERE %(scope)s::text IS NOT NULL AND s.scope = %(scope)s::text
)
UPDATE tool_signatures s
   SET pending_sources = ARRAY(SELECT x FROM unnest(s.pending_sources) x
                                WHERE x NOT IN (SELECT id FROM erase_targets)),
       competence_id = CASE WHEN s.competence_id IN (SELECT id FROM erase_targets) THEN NULL
                            ELSE s.competence_id END,
       plan_id = CASE WHEN s.plan_id IN (SELECT id FROM erase_targets) THEN NULL ELSE s.plan_id END
 WHERE (%(scope)s::text IS NULL OR s.scope <> %(scope)s::text)
   AND (EXISTS (SELECT 1 FROM unnest(s.pending_sources) x JOIN erase_targets t ON t.id = x)
        OR s.competence_id IN (SELECT id FROM erase_targets)
        OR s.plan_id IN (SELECT id FROM erase_targets))

-- name: erase_records
-- Delete an erasure's records: their payloads, tags, provenance, relations both ways, entity terms and identifiers, embeddings and proposal links go with them (RFC 15.4).
DELETE FROM memory_records m USING erase_targets t WHERE m.id = t.id
