-- The entity arm of retrieval_roots (RFC 8.1.3).

-- name: entity_arm
-- Fragment (/*@entity_arm*/): the entity arm: the canonical entities a query term or identifier names, not too common to discriminate, and the records linked to them, the best arm_k by entity idf (RFC 8.1.3); CTEs of retrieval_roots; the statement closes the last.
ent_match AS MATERIALIZED (
    -- canonical entities named by a query term or identifier; the entity itself must be fully
    -- visible; an entity linked to more than fanout records is too common to discriminate
    SELECT m.entity_id,
           -- on idf's grid of 2^-32, so that a record's sum over its entities is exact
           /*@idf_grid(ln(1.0 + corpus.n / (1.0 + c.links)))*/ AS idf
      FROM (SELECT t.record_id AS entity_id FROM entity_terms t
             WHERE t.term = ANY(%(terms)s::text[])
               AND (/*@in_scopes(t.scope)*/)
            UNION
            SELECT i.record_id FROM entity_identifiers i
              JOIN unnest(%(id_namespaces)s::text[], %(id_values)s::text[]) AS k(ns, val)
                ON i.namespace = k.ns AND i.value = k.val
             WHERE /*@in_scopes(i.scope)*/) m
      JOIN memory_records r ON r.id = m.entity_id
     CROSS JOIN corpus
     CROSS JOIN LATERAL (
           -- links to records the caller may see, as document frequencies count them:
           -- hidden records must not make an entity too common to rank (RFC 8.1.3). An
           -- entity with more than link_scan links in a direction is a hub, too common
           -- however few of them the caller sees: counting those would read every link
           SELECT CASE WHEN (SELECT count(*) FROM (
                                    SELECT 1 FROM relations l WHERE l.target_id = m.entity_id
                                     LIMIT %(link_scan)s + 1) h) > %(link_scan)s
                         OR (SELECT count(*) FROM (
                                    SELECT 1 FROM relations l WHERE l.source_id = m.entity_id
                                     LIMIT %(link_scan)s + 1) h) > %(link_scan)s
                       THEN greatest(%(link_scan)s, %(fanout)s) + 1
                  ELSE (SELECT count(*) FROM (
                               SELECT 1 FROM relations l JOIN memory_records x ON x.id = l.source_id
                                WHERE l.target_id = m.entity_id
                                  AND (/*@in_scopes(x.scope)*/)
                                  AND x.sensitivity_rank <= %(max_rank)s + 1 AND x.status <> 'retracted'
                                LIMIT %(fanout)s + 1) a)
                     + (SELECT count(*) FROM (
                               SELECT 1 FROM relations l JOIN memory_records x ON x.id = l.target_id
                                WHERE l.source_id = m.entity_id
                                  AND (/*@in_scopes(x.scope)*/)
                                  AND x.sensitivity_rank <= %(max_rank)s + 1 AND x.status <> 'retracted'
                                LIMIT %(fanout)s + 1) b) END AS links
           OFFSET 0) c  -- counted once, not once per use of links (as idf's df)
     WHERE (/*@in_scopes(r.scope)*/)
       AND r.sensitivity_rank <= %(max_rank)s
       AND (%(as_of)s::timestamptz IS NULL OR r.recorded_at <= %(as_of)s::timestamptz)
       AND (%(include_retracted)s
            OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) <> 'retracted')
       AND (%(include_proposed)s
            OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) <> 'proposed')
       AND c.links <= %(fanout)s
     LIMIT 64
), ent AS MATERIALIZED (
    -- the entities and the records linked to them (either direction), scored by entity idf
    SELECT x.id, sum(x.idf) AS score
      FROM (SELECT m.entity_id AS id, m.idf FROM ent_match m
            UNION ALL
            -- the links as of the read's as_of (RFC 5.6)
            SELECT l.source_id, m.idf FROM ent_match m JOIN relations l ON l.target_id = m.entity_id
             WHERE %(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz
            UNION ALL
            SELECT l.target_id, m.idf FROM ent_match m JOIN relations l ON l.source_id = m.entity_id
             WHERE %(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz) x
      JOIN memory_records r ON r.id = x.id
     WHERE true
       AND (/*@in_scopes(r.scope)*/)
       AND /*@request_filters*/
     GROUP BY x.id
     ORDER BY score DESC, x.id
     LIMIT %(arm_k)s
