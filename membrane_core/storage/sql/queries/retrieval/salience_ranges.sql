-- The salience arm of retrieval_roots (RFC 8.1.4): the records at or above its bar.

-- name: salience_ranges
-- Fragment (/*@salience_ranges*/): without a query, the records at or above the salience bar, read as index ranges, and the best arm_k of them by current salience; for a caller that reads every scope, every record ranked (RFC 8.1.4); CTEs of retrieval_roots; the statement closes the last.
sal_cand AS MATERIALIZED (
    SELECT c.id FROM sal_groups g CROSS JOIN sal_bar b CROSS JOIN LATERAL (
           -- log2(bar) + now / half_life, less a margin for rounding (more rows, never fewer)
           SELECT CASE WHEN b.c > 0 THEN y.k - 1e-9 * (1.0 + abs(y.k)) ELSE '-Infinity'::float8 END AS k
             FROM (SELECT ln(greatest(b.c, 1e-300)) / ln(2.0::float8)
                          + extract(epoch FROM %(now)s::timestamptz)::float8 / g.half_life AS k) y) x
     CROSS JOIN LATERAL (
           -- OFFSET 0 keeps this a range scan of memory_records_decay per group
           SELECT r.id FROM memory_records r
            WHERE r.scope = g.scope AND NOT r.pinned AND r.half_life_seconds = g.half_life
              AND decay_key(r.base_salience, r.reinforced_at, r.half_life_seconds) >= x.k
              AND /*@request_filters*/
           OFFSET 0) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
    UNION
    SELECT r.id
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN sal_bar b
      JOIN memory_records r ON r.scope = s.scope
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
       AND NOT r.pinned AND r.min_salience > 0 AND least(r.base_salience, r.min_salience) > b.c
       AND /*@request_filters*/
    UNION
    -- records whose floor is the bar tie with it (a store decayed to its floors): the final
    -- order breaks ties by recency, so the most recent arm_k of them are enough
    SELECT c.id
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN sal_bar b
     CROSS JOIN LATERAL (
           SELECT r.id FROM memory_records r
            WHERE r.scope = s.scope AND NOT r.pinned AND r.min_salience > 0
              AND least(r.base_salience, r.min_salience) = b.c
              AND /*@request_filters*/
            ORDER BY least(r.base_salience, r.min_salience) DESC, r.created_at DESC, r.id
            LIMIT %(arm_k)s) c
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
    UNION
    SELECT r.id
      FROM unnest(%(scopes)s::text[]) AS s(scope)
     CROSS JOIN sal_bar b
      JOIN memory_records r ON r.scope = s.scope
     WHERE NOT %(has_query)s AND NOT %(all_scopes)s
       AND r.pinned AND r.base_salience >= b.c
       AND /*@request_filters*/
), sal AS MATERIALIZED (
    SELECT x.id FROM (
           SELECT r.id FROM memory_records r
            WHERE NOT %(has_query)s AND NOT %(all_scopes)s
              AND r.id = ANY(ARRAY(SELECT c.id FROM sal_cand c))
            ORDER BY current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                      r.min_salience, r.pinned, %(now)s) DESC, r.created_at DESC, r.id
            LIMIT %(arm_k)s) x
    UNION ALL
    -- a caller that may read every scope: every record is ranked (RFC 8.1.4)
    SELECT x.id FROM (
           SELECT r.id FROM memory_records r
            WHERE NOT %(has_query)s AND %(all_scopes)s
              AND /*@request_filters*/
            ORDER BY current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds,
                                      r.min_salience, r.pinned, %(now)s) DESC, r.created_at DESC, r.id
            LIMIT %(arm_k)s) x
