-- name: claim_work
-- Claim up to limit due items of one kind, skipping rows other workers hold (RFC 9.4).
UPDATE work_items w
   SET claimed_by = %(owner)s,
       claim_expires_at = %(now)s + make_interval(secs => %(lease_seconds)s),
       attempts = w.attempts + 1
  FROM (SELECT id FROM work_items
         WHERE kind = %(kind)s AND NOT dead AND due_at <= %(now)s
           AND (claim_expires_at IS NULL OR claim_expires_at < %(now)s)
         ORDER BY due_at, id
         LIMIT %(limit)s
         FOR UPDATE SKIP LOCKED) due
 WHERE w.id = due.id
RETURNING w.id, w.kind, w.target_id, w.attempts, w.due_at

-- name: hold_work
-- Lock the claimed items the caller still holds, in id order, so a worker whose lease lapsed never processes them twice (RFC 9.4).
SELECT id, target_id FROM work_items
 WHERE id = ANY(%(ids)s::bigint[]) AND claimed_by = %(owner)s
 ORDER BY id
   FOR UPDATE

-- name: complete_work
-- Delete finished items, only while the caller still holds their claim (RFC 9.4).
DELETE FROM work_items WHERE id = ANY(%(ids)s::bigint[]) AND claimed_by = %(owner)s

-- name: reschedule_work
-- Release claimed items with a new due time (next decay checkpoint, retry backoff) (RFC 9.4).
UPDATE work_items w
   SET due_at = u.due_at, claimed_by = NULL, claim_expires_at = NULL,
       last_error = u.error, attempts = CASE WHEN u.error IS NULL THEN 0 ELSE w.attempts END
  FROM unnest(%(ids)s::bigint[], %(due)s::timestamptz[], %(errors)s::text[]) AS u(id, due_at, error)
 WHERE w.id = u.id AND w.claimed_by = %(owner)s

-- name: bury_work
-- Mark items dead after too many attempts, keeping the last error for operators (RFC 9.4).
UPDATE work_items w
   SET dead = true, claimed_by = NULL, claim_expires_at = NULL, last_error = u.error
  FROM unnest(%(ids)s::bigint[], %(errors)s::text[]) AS u(id, error)
 WHERE w.id = u.id AND w.claimed_by = %(owner)s

-- name: release_work
-- Give claimed items back as they were, the claim's attempt not counted: a batch that an outage or a stop cut short (RFC 9.4).
UPDATE work_items
   SET claimed_by = NULL, claim_expires_at = NULL, attempts = greatest(attempts - 1, 0)
 WHERE id = ANY(%(ids)s::bigint[]) AND claimed_by = %(owner)s

-- name: reap_expired_claims
-- Release claims whose lease ran out (the worker died) so another worker can take them (RFC 9.4). Rows a lost worker's session still locks are skipped, not waited for: the server ends that session (its keepalives), and the next reap takes them.
UPDATE work_items w SET claimed_by = NULL, claim_expires_at = NULL
  FROM (SELECT id FROM work_items
         WHERE claim_expires_at < %(now)s AND claimed_by IS NOT NULL
         FOR UPDATE SKIP LOCKED) s
 WHERE w.id = s.id

-- name: work_backlog
-- Due and total items by kind with the age of the oldest due item (RFC 14.2).
SELECT kind,
       count(*) FILTER (WHERE due_at <= %(now)s AND NOT dead) AS due,
       count(*) FILTER (WHERE NOT dead) AS pending,
       count(*) FILTER (WHERE dead) AS dead,
       extract(epoch FROM %(now)s - min(due_at) FILTER (WHERE due_at <= %(now)s AND NOT dead))
           AS oldest_due_seconds
  FROM work_items GROUP BY kind ORDER BY kind

-- name: chunk_requeue
-- Fragment (/*@chunk_requeue('<kind>')*/): the end of one chunk of a store-wide enqueue: a work item of the kind for each row of a `wanted` CTE, due now; an existing item is made due no later, revived if buried, its attempts reset (RFC 9.3). Returns the last id of a `scanned` CTE read by id (the cursor's next position), its rows and the items written (RFC 7.6, 12.5).
queued AS (
    INSERT INTO work_items (kind, target_id, due_at)
    SELECT /*=*/, id, %(now)s FROM wanted
    ON CONFLICT (kind, target_id) DO UPDATE
       SET due_at = least(work_items.due_at, EXCLUDED.due_at), dead = false, attempts = 0,
           last_error = NULL
    RETURNING 1
)
SELECT (SELECT s.id FROM scanned s ORDER BY s.id DESC LIMIT 1) AS last,
       (SELECT count(*) FROM scanned) AS scanned,
       (SELECT count(*) FROM queued) AS queued
