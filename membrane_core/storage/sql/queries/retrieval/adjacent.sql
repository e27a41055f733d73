-- Adjacent episodes of retrieval_roots (RFC 8.2.1): the best fused episodes lift the episodes next to them in time.

-- name: adjacent
-- Fragment (/*@adjacent*/): the fused pool with adjacent episodes lifted, as CTE lifted, which bounds ranks (RFC 8.2.1): the adjacent_sources best active episodes shown in full each reach the adjacent_reach episodes shown in full of their scope before and after them in (occurred_at, id) order, the k-th getting the share adjacent_decay^k of its source's positive score; a pool member adds its share, and one outside the pool enters at it (from a source at or below the pool's mean, 1 - adjacent_decay^k below the source); a lifted episode passes neither its source nor an active semantic record, and ranks after either on a tie (column lifted); CTEs of retrieval_roots; the statement closes the last.
adj_sources AS MATERIALIZED (
    SELECT s.id, s.score, r.scope, r.occurred_at
      FROM scored s JOIN memory_records r ON r.id = s.id
     WHERE r.type = 'episodic' AND r.occurred_at IS NOT NULL AND s.status = 'active'
       -- as expansion (RFC 8.4): nothing is followed from or to a record shown redacted
       AND r.sensitivity_rank <= %(max_rank)s
     ORDER BY s.score DESC, s.id
     LIMIT %(adjacent_sources)s
), adj_lift AS (
    -- each side read in index order (memory_records_episode_time) and cut at the reach before
    -- it is numbered; an episode hidden or redacted is skipped: it neither enters nor takes a place
    SELECT n.id, h.score, greatest(h.score, 0) * power(%(adjacent_decay)s, n.k) AS share,
           CASE WHEN h.score > 0 THEN h.score * power(%(adjacent_decay)s, n.k)
                ELSE h.score + power(%(adjacent_decay)s, n.k) - 1 END AS entry
      FROM adj_sources h
     CROSS JOIN LATERAL (
           SELECT b.id, row_number() OVER (ORDER BY b.occurred_at DESC, b.id DESC) AS k
             FROM (SELECT r.id, r.occurred_at FROM memory_records r
                    WHERE r.scope = h.scope AND r.type = 'episodic'
                      AND (r.occurred_at, r.id) < (h.occurred_at, h.id)
                      AND /*@request_filters*/ AND r.sensitivity_rank <= %(max_rank)s
                    ORDER BY r.occurred_at DESC, r.id DESC
                    LIMIT %(adjacent_reach)s) b
           UNION ALL
           SELECT a.id, row_number() OVER (ORDER BY a.occurred_at, a.id) AS k
             FROM (SELECT r.id, r.occurred_at FROM memory_records r
                    WHERE r.scope = h.scope AND r.type = 'episodic'
                      AND (r.occurred_at, r.id) > (h.occurred_at, h.id)
                      AND /*@request_filters*/ AND r.sensitivity_rank <= %(max_rank)s
                    ORDER BY r.occurred_at, r.id
                    LIMIT %(adjacent_reach)s) a) n
), adj_raised AS (
    -- the best each episode gets: a pool member its score plus its share, an episode outside
    -- the pool its entry; never past its source
    SELECT l.id, max(CASE WHEN x.id IS NULL THEN l.entry ELSE least(x.score + l.share, l.score) END)
               AS score
      FROM adj_lift l LEFT JOIN scored x ON x.id = l.id
     GROUP BY l.id
), adj_capped AS (
    -- nor past an active fact: the store's current belief keeps its place above the episodes
    -- that ranked below it (RFC 8.2)
    SELECT a.id, least(a.score, coalesce(
               (SELECT min(f.score) FROM scored f
                 WHERE f.is_semantic AND f.status = 'active'
                   AND f.score > coalesce(x.score, '-Infinity'::float8)),
               'Infinity'::float8)) AS score
      FROM adj_raised a LEFT JOIN scored x ON x.id = a.id
), lifted AS (
    SELECT s.id, s.status, s.vector_score, s.text_score, s.entity_score, s.salience, s.created_at,
           s.bytes, greatest(s.score, c.score) AS score, s.pool_size, s.n_vector, s.n_text,
           s.n_entity, coalesce(c.score > s.score, false) AS lifted
      FROM scored s LEFT JOIN adj_capped c ON c.id = s.id
    UNION ALL
    -- outside the pool an episode has no evidence of its own (the pool's mean, 0 in zsum)
    SELECT r.id, status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until),
           NULL, NULL, NULL,
           current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                            r.pinned, %(now)s),
           r.created_at,
           CASE WHEN r.sensitivity_rank > %(max_rank)s THEN 256 ELSE r.projected_bytes END,
           c.score, p.pool_size, p.n_vector, p.n_text, p.n_entity, true
      FROM adj_capped c
      JOIN memory_records r ON r.id = c.id
     CROSS JOIN (SELECT max(pool_size) AS pool_size, max(n_vector) AS n_vector,
                        max(n_text) AS n_text, max(n_entity) AS n_entity FROM scored) p
     WHERE NOT EXISTS (SELECT 1 FROM scored s WHERE s.id = c.id)
