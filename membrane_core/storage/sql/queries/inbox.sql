-- name: op_insert
-- Insert operations in one statement; a reused (principal, idempotency key) inserts nothing (RFC 9.1, 9.2). Binary parameters (%b): a text-format array escapes each element with a regex, most of a keyed batch's submit time.
INSERT INTO operations (id, kind, status, principal, idempotency_key, request_hash, request, trust,
                        target_id, record_id, error, created_at, finished_at, request_id)
SELECT u.id, u.kind, u.status, u.principal, u.idem, u.hash, u.request, u.trust, u.target,
       u.record_id, u.error, u.created, u.finished, u.request_id
  FROM unnest(%(ids)b::uuid[], %(kinds)b::text[], %(statuses)b::text[], %(principals)b::text[],
              %(keys)b::text[], %(hashes)b::text[], %(requests)b::text[]::jsonb[],
              %(trusts)b::text[]::jsonb[], %(targets)b::uuid[], %(record_ids)b::uuid[],
              %(errors)b::text[]::jsonb[], %(created)b::timestamptz[], %(finished)b::timestamptz[],
              %(request_ids)b::text[])
       AS u(id, kind, status, principal, idem, hash, request, trust, target, record_id, error,
            created, finished, request_id)
ON CONFLICT (principal, idempotency_key) DO NOTHING
RETURNING id

-- name: op_by_idempotency_keys
-- Existing operations of one principal by idempotency key, with their request hashes (RFC 9.2).
SELECT idempotency_key, id, request_hash FROM operations
 WHERE principal = %(principal)s AND idempotency_key = ANY(%(keys)s::text[])

-- name: op_views
-- Operations by id, as views (RFC 9.1).
SELECT id, kind, status, principal, record_id, record_ids, error, result, created_at, finished_at,
       request_id
  FROM operations WHERE id = ANY(%(ids)s::uuid[])

-- name: op_count_unfinished
-- How many of the given operations are still queued or running: the cheap poll of a wait (RFC 9.1).
SELECT count(*) FROM operations
 WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('queued', 'running')

-- name: op_lock_captures_by_id
-- Lock the given capture operations that are still to do, skipping those another worker holds (RFC 9.1).
SELECT id, request::text, trust::text, record_id FROM operations
 WHERE id = ANY(%(ids)s::uuid[]) AND kind = 'capture'
   AND (status = 'queued' OR (status = 'running' AND claim_expires_at < %(now)s))
 ORDER BY created_at, id
 FOR UPDATE SKIP LOCKED

-- name: op_lock_captures_due
-- Lock up to limit more queued capture operations, oldest first, skipping held ones (RFC 9.1).
-- The ids are picked in index order first (operations_pending), the wide rows fetched after.
WITH picked AS (
    SELECT id, created_at FROM operations
     WHERE kind = 'capture' AND status IN ('queued', 'running')
       AND (status = 'queued' OR claim_expires_at < %(now)s)
       AND NOT (id = ANY(%(exclude)s::uuid[]))
     ORDER BY created_at, id
     LIMIT %(limit)s
     FOR UPDATE SKIP LOCKED
)
SELECT o.id, o.request::text, o.trust::text, o.record_id
  FROM picked p JOIN operations o ON o.id = p.id
 ORDER BY p.created_at, p.id

-- name: op_finish_many
-- Record the outcome of many operations at once; record ids travel as uuid[] literals, a capture's result (its fact and proposal, RFC 5.7) as jsonb (RFC 9.1).
UPDATE operations o
   SET status = u.status, record_ids = u.rids::uuid[], error = u.error, result = u.result,
       finished_at = %(now)s, started_at = coalesce(o.started_at, %(now)s),
       attempts = o.attempts + 1, claimed_by = NULL, claim_expires_at = NULL
  FROM unnest(%(ids)s::uuid[], %(statuses)s::text[], %(rids)s::text[], %(errors)s::jsonb[],
              %(results)s::jsonb[])
       AS u(id, status, rids, error, result)
 WHERE o.id = u.id

-- name: op_claim_one
-- Claim one queued (or lease-expired) non-capture operation for a lease (RFC 9.1, 9.4).
UPDATE operations o
   SET status = 'running', claimed_by = %(worker)s,
       claim_expires_at = %(now)s + make_interval(secs => %(lease_seconds)s),
       attempts = o.attempts + 1, started_at = coalesce(o.started_at, %(now)s)
  FROM (SELECT id FROM operations
         WHERE id = %(id)s AND kind <> 'capture'
           AND (status = 'queued' OR (status = 'running' AND claim_expires_at < %(now)s))
         FOR UPDATE SKIP LOCKED) c
 WHERE o.id = c.id
RETURNING o.id, o.kind, o.request, o.trust::text, o.target_id, o.attempts

-- name: op_finish_one
-- Record the outcome of one claimed operation while the caller still holds it (RFC 9.1).
UPDATE operations
   SET status = %(status)s, record_ids = %(record_ids)s::uuid[], result = %(result)s::jsonb,
       error = %(error)s::jsonb, finished_at = %(now)s, claimed_by = NULL, claim_expires_at = NULL
 WHERE id = %(id)s AND claimed_by = %(worker)s AND status = 'running'

-- name: op_release
-- Give a claimed operation back to the queue after a transient failure (RFC 9.4).
UPDATE operations
   SET status = 'queued', claimed_by = NULL, claim_expires_at = NULL, error = %(error)s::jsonb
 WHERE id = %(id)s AND claimed_by = %(worker)s AND status = 'running'

-- name: op_reap_expired
-- Put operations whose worker's lease ran out back in the queue (RFC 9.4). Rows a lost worker's session still locks are skipped, not waited for: the server ends that session (its keepalives), and the next reap takes them.
UPDATE operations o
   SET status = 'queued', claimed_by = NULL, claim_expires_at = NULL, dispatched_at = NULL
  FROM (SELECT id FROM operations
         WHERE status = 'running' AND claim_expires_at < %(now)s
         FOR UPDATE SKIP LOCKED) s
 WHERE o.id = s.id

-- name: op_redispatch_stale
-- Queued operations not picked up since before the cutoff, stamped as dispatched now (RFC 9.5).
UPDATE operations o SET dispatched_at = %(now)s
  FROM (SELECT id FROM operations
         WHERE status = 'queued' AND coalesce(dispatched_at, created_at) < %(cutoff)s
         ORDER BY created_at, id
         LIMIT %(limit)s
         FOR UPDATE SKIP LOCKED) s
 WHERE o.id = s.id
RETURNING o.kind, o.id

-- name: op_counts
-- Operations by kind and status with the age of the oldest queued one (RFC 9.1).
SELECT kind, status, count(*) AS n,
       extract(epoch FROM %(now)s - min(created_at)) AS oldest_seconds
  FROM operations WHERE status IN ('queued', 'running') GROUP BY kind, status ORDER BY kind, status

-- name: op_lock_one
-- Lock one queued (or lease-expired) non-capture operation for the caller's transaction (RFC 9.1).
SELECT id, kind, request, trust::text, target_id, attempts FROM operations
 WHERE id = %(id)s AND kind <> 'capture'
   AND (status = 'queued' OR (status = 'running' AND claim_expires_at < %(now)s))
 FOR UPDATE SKIP LOCKED

-- name: op_copy
-- Bulk insert of operations without idempotency keys, the high-volume path (RFC 9.1).
COPY operations (id, kind, status, principal, request_hash, request, trust, target_id, record_id,
                 error, created_at, finished_at, request_id) FROM STDIN (FORMAT BINARY)

-- name: op_purge_finished
-- Delete up to limit operations finished before the cutoff, oldest first (RFC 9.2).
DELETE FROM operations WHERE id IN (
    SELECT id FROM operations
     WHERE status IN ('succeeded', 'failed') AND finished_at < %(cutoff)s
     ORDER BY finished_at
     LIMIT %(limit)s)
