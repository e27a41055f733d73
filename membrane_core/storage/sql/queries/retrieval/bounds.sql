-- The ranking and the cut by rows and projected bytes, and hydrating what fits (RFC 8.2, 8.3).

-- name: bounds
-- Fragment (/*@bounds*/): the fused candidates ranked, and cut at the row cap with their running projected bytes (RFC 8.2, 8.3, 5.1); CTEs of retrieval_roots; the statement closes the last.
ranked AS (
    -- RFC 8.2, 5.1: every active record above every contested one, then the fused score;
    -- ties by salience, recency, id (with adjacent episodes, 8.2.1: first the unlifted)
    SELECT s.*, row_number() OVER (ORDER BY s.status <> 'active', s.score DESC,
                                            /*?adjacent*/s.lifted, /*?end*/s.salience DESC,
                                            s.created_at DESC, s.id) AS ord
      FROM /*?adjacent*/lifted/*?end*//*?!adjacent*/scored/*?end*/ s
), bounded AS (
    -- RFC 8.3: cut at the row cap and the running projected bytes before hydrating
    SELECT k.*, sum(k.bytes) OVER (ORDER BY k.ord) AS running
      FROM ranked k
     WHERE k.ord <= %(limit)s

-- name: retrieval_bounded_hydrate
-- Cut ranked ids by rows and running projected bytes in SQL, hydrate only what fits; relations only to fully visible targets (RFC 8.3, 2.5).
WITH wanted AS (
    SELECT u.id, u.ord FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS u(id, ord)
     WHERE u.ord <= %(limit)s
), sized AS (
    SELECT w.id, w.ord,
           CASE WHEN r.sensitivity_rank > %(max_rank)s THEN 256 ELSE r.projected_bytes END AS bytes
      FROM wanted w JOIN memory_records r ON r.id = w.id
), bounded AS (
    SELECT id, ord, bytes, sum(bytes) OVER (ORDER BY ord) AS running FROM sized
)
SELECT b.ord, b.bytes, b.running, (b.running <= %(max_bytes)s) AS fits,
       /*@record_fields*/,
       /*@visible_relations*/ AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= %(max_bytes)s
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord
