-- Graph expansion: the first hop within retrieval_roots, and each further hop (RFC 8.4).

-- name: hop_first
-- Fragment (/*@hop_first*/): with expansion (the hop part), what hop_ctes reads for the first hop: the roots that fit and are shown in full as its frontier, none expanded, the fitting roots known, the whole byte budget (RFC 8.4); CTEs of retrieval_roots; the statement closes the last.
f AS (
    -- RFC 8.4: with expansion (the hop part, written in), its first hop runs here, from the
    -- roots that fit and are shown in full; the service uses it when it keeps exactly these
    SELECT b.id FROM bounded b JOIN memory_records r ON r.id = b.id
     WHERE b.running <= %(max_bytes)s AND r.sensitivity_rank <= %(max_rank)s
), hop_expanded AS (
    SELECT NULL::uuid AS id WHERE false
), hop_known AS (
    SELECT b.id FROM bounded b WHERE b.running <= %(max_bytes)s
), hop_budget AS (
    SELECT %(max_bytes)s::bigint AS v

-- name: retrieval_graph_hop
-- One breadth-first hop over relations in both directions, neighbours trust- and status-filtered, and the new neighbours hydrated under the remaining byte budget (RFC 8.4, 8.3).
WITH f AS (
    SELECT DISTINCT unnest(%(frontier)s::uuid[]) AS id
), hop_expanded AS (
    SELECT unnest(%(expanded)s::uuid[]) AS id
), hop_known AS (
    SELECT unnest(%(known)s::uuid[]) AS id
), hop_budget AS (
    SELECT %(hop_bytes)s::bigint AS v
), /*@hop_ctes*/
SELECT h.bytes, /*@hop_columns*/
  /*@hop_from*/
 ORDER BY h.n

-- name: hop_ctes
-- Fragment (/*@hop_ctes*/): one hop from the frontier f, skipping nodes in hop_expanded, hydrating new nodes (not in hop_known) within hop_budget; hop_rows, hop_edges, hop_new bound it (RFC 8.4).
e AS (
    -- at most hop_rows edges per frontier node and direction, so a hub costs no more; the
    -- far end passes the filters (and is not a node expanded before) ahead of that cut, so
    -- that edges the caller may not follow never crowd out one it may (RFC 8.4). A relation
    -- is followed only to a record shown in full: a view omits the others (RFC 2.5)
    SELECT o.* FROM f, LATERAL (
           SELECT l.source_id, l.predicate, l.target_id, l.target_id AS other, l.weight,
                  l.created_at, r.scope, r.sensitivity, r.status, r.retracted_at,
                  r.contested_at, r.proposed_until, r.projected_bytes
             FROM relations l JOIN memory_records r ON r.id = l.target_id
            WHERE l.source_id = f.id
              AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
              AND NOT EXISTS (SELECT 1 FROM hop_expanded x WHERE x.id = l.target_id)
              AND (/*@in_scopes(r.scope)*/)
              AND r.sensitivity_rank <= %(max_rank)s AND /*@neighbour_filters*/
            ORDER BY l.predicate, l.target_id LIMIT %(hop_rows)s) o
    UNION ALL
    SELECT i.* FROM f, LATERAL (
           SELECT l.source_id, l.predicate, l.target_id, l.source_id AS other, l.weight,
                  l.created_at, r.scope, r.sensitivity, r.status, r.retracted_at,
                  r.contested_at, r.proposed_until, r.projected_bytes
             FROM relations l JOIN memory_records r ON r.id = l.source_id
            WHERE l.target_id = f.id
              AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
              AND NOT EXISTS (SELECT 1 FROM hop_expanded x WHERE x.id = l.source_id)
              AND (/*@in_scopes(r.scope)*/)
              AND r.sensitivity_rank <= %(max_rank)s AND /*@neighbour_filters*/
            LIMIT %(hop_rows)s) i
), hop AS MATERIALIZED (
    SELECT e.source_id, e.predicate, e.target_id, e.other, e.scope, e.sensitivity,
           status_at(e.status, e.retracted_at, e.contested_at, %(as_of)s::timestamptz, e.proposed_until) AS status,
           e.projected_bytes AS bytes,
           row_number() OVER (ORDER BY coalesce(e.weight, 0) DESC, e.created_at, e.source_id,
                                       e.predicate, e.target_id) AS n
      FROM e
     ORDER BY n
     LIMIT %(hop_rows)s
), edges AS (
    -- each edge once (a relation between two frontier nodes is found from both ends), at most
    -- hop_edges of them: the edges the expansion will take, in its order
    SELECT * FROM (SELECT DISTINCT ON (h.source_id, h.predicate, h.target_id) h.*
                     FROM hop h ORDER BY h.source_id, h.predicate, h.target_id, h.n) d
     ORDER BY d.n
     LIMIT %(hop_edges)s
), fresh AS (
    -- the neighbours these edges discover, in discovery order, up to hop_new, with the
    -- running projected bytes: the rows worth hydrating now (RFC 8.3)
    SELECT x.other, x.n, sum(x.bytes) OVER (ORDER BY x.n) AS running
      FROM (SELECT DISTINCT ON (d.other) d.other, d.n, d.bytes
              FROM edges d WHERE NOT EXISTS (SELECT 1 FROM hop_known k WHERE k.id = d.other)
             ORDER BY d.other, d.n) x
     ORDER BY x.n
     LIMIT %(hop_new)s
)

-- name: hop_columns
-- Fragment (/*@hop_columns*/): a hop row: the edge, the neighbour's scope, sensitivity and status, the row's order, and the neighbour hydrated when the hop hydrated it (RFC 8.4).
h.source_id, h.predicate, h.target_id, h.other, h.scope AS other_scope,
h.sensitivity AS other_sensitivity, h.status AS other_status, h.n,
(x.id IS NOT NULL) AS hydrated, x.*

-- name: hop_from
-- Fragment (/*@hop_from*/): the hop's rows, each new neighbour joined to its record where it fits hop_budget (RFC 8.4, 8.3).
FROM hop h
LEFT JOIN fresh w ON w.n = h.n AND w.running <= (SELECT v FROM hop_budget)
LEFT JOIN LATERAL (
      -- the neighbour's columns only on the rows that hydrate it: the subqueries among them
      -- (tags, provenance, relations) run for those rows alone, not for every edge
      SELECT /*@record_fields*/, /*@visible_relations*/ AS relations
        FROM memory_records r LEFT JOIN record_payloads p ON p.record_id = r.id
       WHERE r.id = w.other
      OFFSET 0) x ON true
