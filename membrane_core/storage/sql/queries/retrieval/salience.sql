-- The salience arm of retrieval_roots (RFC 8.1.4): its groups and its bar (ranges: salience_ranges.sql).

-- name: salience_bar
-- Fragment (/*@salience_bar*/): without a query (the !has_query part), the salience arm's groups, the best arm_k by each order an index holds, and the bar they set (RFC 8.1.4); CTEs of retrieval_roots; the statement closes the last.
sal_groups AS MATERIALIZED (
    -- without a query, salience alone proposes candidates (RFC 8.1.4), read in index order
    -- rather than computed for every record of the scope. Here: the (scope, half-life)
    -- groups of the caller's unpinned records, one probe of memory_records_decay each
    SELECT s.scope, h.half_life
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN LATERAL (
           WITH RECURSIVE hl(half_life) AS (
                SELECT min(r.half_life_seconds) FROM memory_records r
                 WHERE r.scope = s.scope AND NOT r.pinned
                UNION ALL
                SELECT (SELECT min(r.half_life_seconds) FROM memory_records r
                         WHERE r.scope = s.scope AND NOT r.pinned AND r.half_life_seconds > hl.half_life)
                  FROM hl WHERE hl.half_life IS NOT NULL)
           SELECT hl.half_life FROM hl WHERE hl.half_life IS NOT NULL) h
     -- written-in shape flags: with a query (or every scope) the planner drops all of this
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
), sal_first AS MATERIALIZED (
    -- the best arm_k that pass the filters by each order an index holds: decay_key within
    -- each group (the order of decayed salience), the floor, and pinned records' base. UNION:
    -- a record with a floor is found by two orders and must count once toward the bar
    SELECT c.id, c.cur FROM sal_groups g CROSS JOIN LATERAL (
           SELECT r.id, current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                         r.min_salience, r.pinned, %(now)s) AS cur
             FROM memory_records r
            WHERE r.scope = g.scope AND NOT r.pinned AND r.half_life_seconds = g.half_life
              AND /*@request_filters*/
            ORDER BY decay_key(r.base_salience, r.reinforced_at, r.half_life_seconds) DESC
            LIMIT %(arm_k)s) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
    UNION
    SELECT c.id, c.cur
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN LATERAL (
           SELECT r.id, current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                         r.min_salience, r.pinned, %(now)s) AS cur
             FROM memory_records r
            WHERE r.scope = s.scope AND NOT r.pinned AND r.min_salience > 0
              AND /*@request_filters*/
            ORDER BY least(r.base_salience, r.min_salience) DESC
            LIMIT %(arm_k)s) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
    UNION
    SELECT c.id, c.cur
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN LATERAL (
           SELECT r.id, r.base_salience AS cur
             FROM memory_records r
            WHERE r.scope = s.scope AND r.pinned
              AND /*@request_filters*/
            ORDER BY r.base_salience DESC
            LIMIT %(arm_k)s) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
), sal_bar AS (
    -- the arm_k-th best current salience among them (none: no bar). A record's current
    -- salience is at most the larger of its floor and 2^(decay_key - now / half_life)
    -- (equal unless reinforced_at is in the future, where it is base), so every record at
    -- or above the bar is within one of the three ranges below: ties included, exact
    SELECT coalesce((SELECT f.cur FROM sal_first f ORDER BY f.cur DESC
                      LIMIT 1 OFFSET %(arm_k)s - 1), '-Infinity'::float8) AS c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s

-- name: salience_none
-- Fragment (/*@salience_none*/): with a query (the has_query part), the salience arm, which proposes nothing (RFC 8.1.4, 8.1.5); CTEs of retrieval_roots; the statement closes the last.
sal AS (
    -- with a query the salience arm proposes nothing (RFC 8.1.4); left out of the text, its
    -- parts cost no executor set-up either (RFC 8.1.5)
    SELECT NULL::uuid AS id WHERE false
