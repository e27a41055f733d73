-- Lists (RFC 10.7): records by filter in keyset pages, lineage, operations, the work queue and
-- scopes. Records are selected with retrieval's own predicates (request_filters, in_scopes) and
-- hydrated with its fragments, so a list and a retrieval see exactly the same records.

-- name: list_records
-- One keyset page of records, newest first (created_at, id), filtered as retrieval filters (RFC 8.1, 7.3, 5.6), cut by rows and projected bytes, and hydrated where it fits (RFC 10.7). It reads each listed scope's listing index backwards from the position and merges them; for every scope (`every_scope`) the scopes come from a loose scan of the index. The position (`positioned`) and a single listed scope (`one_scope`, else `many_scopes`) are shape parts and the row limits are written in, so the generic plan has the position as an index condition and expects the rows a custom plan expects (under a bound LIMIT or an unnested parameter it expects ten times more, loses to a custom plan, and every call is planned again): a prepared page never pays for planning.
WITH RECURSIVE /*?every_scope*/listed(scope) AS (
    (SELECT m.scope FROM memory_records m ORDER BY m.scope LIMIT 1)
    UNION ALL
    SELECT (SELECT m.scope FROM memory_records m WHERE m.scope > l.scope ORDER BY m.scope LIMIT 1)
      FROM listed l WHERE l.scope IS NOT NULL
), /*?end*//*?one_scope*/listed(scope) AS (
    SELECT (%(scopes)s::text[])[1]
), /*?end*//*?many_scopes*/listed(scope) AS (
    SELECT unnest(%(scopes)s::text[])
), /*?end*/page AS (
    SELECT k.id, k.created_at, k.status_as_of, k.bytes
      FROM listed s CROSS JOIN LATERAL (
    SELECT r.id, r.created_at,
           status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) AS status_as_of,
           CASE WHEN r.sensitivity_rank > %(max_rank)s THEN 256 ELSE r.projected_bytes END AS bytes
      FROM memory_records r
     WHERE r.scope = s.scope
       /*?positioned*/AND (r.created_at, r.id) < (%(after_created)s::timestamptz, %(after_id)s::uuid)/*?end*/
       AND /*@request_filters*/
       AND (%(statuses)s::text[] IS NULL
            OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until)
               = ANY(%(statuses)s::text[]))
       AND (%(ranks)s::int[] IS NULL OR r.sensitivity_rank = ANY(%(ranks)s::int[]))
       AND (%(entity)s::uuid IS NULL
            OR EXISTS (SELECT 1 FROM relations l WHERE l.source_id = r.id AND l.target_id = %(entity)s::uuid)
            OR EXISTS (SELECT 1 FROM relations l WHERE l.target_id = r.id AND l.source_id = %(entity)s::uuid))
       AND (%(subjects)s::text[] IS NULL OR r.fact_subject = ANY(%(subjects)s::text[]))
       AND (%(predicates)s::text[] IS NULL OR r.fact_predicate = ANY(%(predicates)s::text[]))
       AND (%(created_after)s::timestamptz IS NULL OR r.created_at >= %(created_after)s::timestamptz)
       AND (%(created_before)s::timestamptz IS NULL OR r.created_at < %(created_before)s::timestamptz)
       AND (%(occurred_after)s::timestamptz IS NULL OR r.occurred_at >= %(occurred_after)s::timestamptz)
       AND (%(occurred_before)s::timestamptz IS NULL OR r.occurred_at < %(occurred_before)s::timestamptz)
       AND (%(valid_after)s::timestamptz IS NULL OR r.valid_to IS NULL OR r.valid_to > %(valid_after)s::timestamptz)
       AND (%(valid_before)s::timestamptz IS NULL
            OR r.valid_from IS NULL OR r.valid_from < %(valid_before)s::timestamptz)
     ORDER BY r.created_at DESC, r.id DESC
     LIMIT %(rows)s) k
     ORDER BY k.created_at DESC, k.id DESC
     LIMIT %(rows)s
), bounded AS (
    SELECT p.*, row_number() OVER w AS ord, sum(p.bytes) OVER w AS running
      FROM page p
    WINDOW w AS (ORDER BY p.created_at DESC, p.id DESC)
)
SELECT b.ord, b.bytes, b.running, (b.running <= %(max_bytes)s AND b.ord <= %(limit)s) AS fits,
       b.status_as_of, b.id AS listed_id, b.created_at AS listed_created_at,
       /*@record_fields*/,
       /*@visible_relations*/ AS relations
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= %(max_bytes)s AND b.ord <= %(limit)s
  LEFT JOIN record_payloads p ON p.record_id = r.id
 ORDER BY b.ord

-- name: list_records_bare
-- The benchmark's baseline (RFC 10.7, 14.1): the ids of one scope's newest records after a position, by its listing index alone, with no filter, trust check or hydration.
SELECT r.id, r.created_at FROM memory_records r
 WHERE r.scope = %(scope)s
   AND (%(after_created)s::timestamptz IS NULL
        OR (r.created_at, r.id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY r.created_at DESC, r.id DESC
 LIMIT %(limit)s

-- name: lineage_walk
-- The records a record's corrections connect it to (RFC 10.7): a breadth-first walk over the correction relations in both directions, at most max_nodes records, each with its depth, scope, sensitivity and status as of the read.
WITH RECURSIVE walk(id, depth, path) AS (
    SELECT %(id)s::uuid, 0, ARRAY[%(id)s::uuid]
    UNION ALL
    SELECT n.other, w.depth + 1, w.path || n.other
      FROM walk w
      CROSS JOIN LATERAL (
          SELECT l.target_id AS other FROM relations l
           WHERE l.source_id = w.id AND l.predicate = ANY(%(predicates)s::text[])
             AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
          UNION
          SELECT l.source_id FROM relations l
           WHERE l.target_id = w.id AND l.predicate = ANY(%(predicates)s::text[])
             AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
      ) n
     WHERE w.depth < %(max_depth)s AND NOT n.other = ANY(w.path)
), nodes AS (
    SELECT id, min(depth) AS depth FROM walk GROUP BY id ORDER BY min(depth), id LIMIT %(max_nodes)s + 1
)
SELECT n.id, n.depth, r.scope, r.sensitivity,
       status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) AS status,
       r.recorded_at
  FROM nodes n JOIN memory_records r ON r.id = n.id
 ORDER BY n.depth, n.id

-- name: lineage_edges
-- The correction relations among a lineage's records (RFC 10.7), made by as_of when the read has one.
SELECT l.source_id, l.predicate, l.target_id, l.created_at
  FROM relations l
 WHERE l.source_id = ANY(%(ids)s::uuid[]) AND l.target_id = ANY(%(ids)s::uuid[])
   AND l.predicate = ANY(%(predicates)s::text[])
   AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
 ORDER BY l.created_at, l.source_id, l.target_id

-- name: lineage_audit
-- The correction entries of a lineage's records (revise, fork, merge), written by as_of when the read has one (RFC 10.7, 5.5).
SELECT id, record_id, scope, sensitivity, action, actor, ts, rationale, details,
       details::text AS details_text, prev_hash, hash, content_digest, erased_by
  FROM audit_log
 WHERE record_id = ANY(%(ids)s::uuid[]) AND action IN ('create', 'revise', 'fork', 'merge')
   AND (%(as_of)s::timestamptz IS NULL OR ts <= %(as_of)s::timestamptz)
 ORDER BY id

-- name: list_operations
-- One keyset page of operations, newest first (created_at, id): a principal's own, or every one (RFC 10.7); the scope is the capture's, else the target record's.
SELECT o.id, o.kind, o.status, o.principal, o.record_id, o.record_ids, o.error, o.result,
       o.created_at, o.finished_at, o.request_id, o.target_id, o.attempts,
       coalesce(o.request->>'scope', t.scope) AS scope
  FROM operations o
  LEFT JOIN memory_records t ON t.id = o.target_id
 WHERE (%(principal)s::text IS NULL OR o.principal = %(principal)s::text)
   AND (%(kinds)s::text[] IS NULL OR o.kind = ANY(%(kinds)s::text[]))
   AND (%(statuses)s::text[] IS NULL OR o.status = ANY(%(statuses)s::text[]))
   AND (%(scope)s::text IS NULL OR coalesce(o.request->>'scope', t.scope) = %(scope)s::text)
   AND (%(created_after)s::timestamptz IS NULL OR o.created_at >= %(created_after)s::timestamptz)
   AND (%(created_before)s::timestamptz IS NULL OR o.created_at < %(created_before)s::timestamptz)
   AND (%(after_created)s::timestamptz IS NULL
        OR (o.created_at, o.id) < (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY o.created_at DESC, o.id DESC
 LIMIT %(limit)s

-- name: work_jobs
-- Each job's items: due now and unclaimed, claimed, retrying after a failure, buried, pending, and the oldest due (RFC 10.7, 9.4).
SELECT kind,
       count(*) FILTER (WHERE NOT dead AND due_at <= %(now)s
                        AND (claim_expires_at IS NULL OR claim_expires_at < %(now)s)) AS due,
       count(*) FILTER (WHERE NOT dead AND claim_expires_at >= %(now)s) AS claimed,
       count(*) FILTER (WHERE NOT dead AND attempts > 0 AND last_error IS NOT NULL
                        AND (claim_expires_at IS NULL OR claim_expires_at < %(now)s)) AS retrying,
       count(*) FILTER (WHERE dead) AS buried,
       count(*) FILTER (WHERE NOT dead) AS pending,
       min(due_at) FILTER (WHERE NOT dead AND due_at <= %(now)s) AS oldest_due_at
  FROM work_items GROUP BY kind ORDER BY kind

-- name: work_buried
-- One page of buried items by id, with their last error (RFC 10.7, 9.4).
SELECT id, kind, target_id, attempts, last_error, due_at, created_at
  FROM work_items
 WHERE dead AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
   AND (%(after)s::bigint IS NULL OR id > %(after)s::bigint)
 ORDER BY id
 LIMIT %(limit)s

-- name: work_requeue_lock
-- Lock the records of the buried items among ids in id order, as every writer of a record's audit entries holds its row lock (RFC 5.5, 5.2).
SELECT r.id FROM memory_records r
 WHERE r.id IN (SELECT w.target_id FROM work_items w WHERE w.id = ANY(%(ids)s::bigint[]) AND w.dead)
 ORDER BY r.id
   FOR NO KEY UPDATE

-- name: work_requeue
-- Put buried items whose record still exists back, due now with no attempt counted; items not buried are left as they are, so a repeated requeue changes nothing (RFC 10.7). Returns each item with its record's scope and sensitivity for the audit entry.
UPDATE work_items w
   SET dead = false, attempts = 0, due_at = %(now)s, claimed_by = NULL, claim_expires_at = NULL
  FROM memory_records r
 WHERE w.id = ANY(%(ids)s::bigint[]) AND w.dead AND r.id = w.target_id
RETURNING w.id, w.kind, w.target_id, w.last_error, r.scope, r.sensitivity

-- name: work_requeue_audit
-- One requeue entry on each requeued item's record (RFC 10.7, 5.5).
INSERT INTO audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details)
SELECT u.record_id, u.scope, u.sensitivity, 'requeue', %(actor)s, %(now)s, u.rationale, u.details
  FROM unnest(%(record_ids)s::uuid[], %(scopes)s::text[], %(sensitivities)s::text[],
              %(rationales)s::text[], %(details)s::jsonb[])
       AS u(record_id, scope, sensitivity, rationale, details)

-- name: inbox_counts
-- Operations in the inbox by kind and status: queued, running and failed (RFC 10.7).
SELECT kind, status, count(*) AS count
  FROM operations WHERE status IN ('queued', 'running', 'failed')
 GROUP BY kind, status ORDER BY kind, status

-- name: scope_counts
-- The records of each scope the caller may read, by status, at most one level above its maximum sensitivity (RFC 10.7).
SELECT r.scope, count(*) AS records,
       count(*) FILTER (WHERE r.status = 'active') AS active,
       count(*) FILTER (WHERE r.status = 'contested') AS contested,
       count(*) FILTER (WHERE r.status = 'retracted') AS retracted,
       count(*) FILTER (WHERE r.status = 'proposed') AS proposed
  FROM memory_records r
 WHERE (/*@in_scopes(r.scope)*/) AND r.sensitivity_rank <= %(max_rank)s + 1
 GROUP BY r.scope ORDER BY r.scope
 LIMIT %(limit)s
