-- Review (RFC 5.7): proposals, their records, corroboration, decisions, the queue and expiry.

-- name: proposal_insert
-- New pending proposals, one row each; the proposer is the first of their actors (RFC 5.7).
INSERT INTO proposals (id, scope, sensitivity, source, proposed_by, actors, created_at, expires_at)
SELECT u.id, u.scope, u.sensitivity, u.source, u.actor, ARRAY[u.actor], u.created, u.expires
  FROM unnest(%(ids)s::uuid[], %(scopes)s::text[], %(sensitivities)s::text[], %(sources)s::text[],
              %(actors)s::text[], %(created)s::timestamptz[], %(expires)s::timestamptz[])
       AS u(id, scope, sensitivity, source, actor, created, expires)

-- name: proposal_records_insert
-- The records of proposals; a record belongs to one proposal (RFC 5.7).
INSERT INTO proposal_records (record_id, proposal_id)
SELECT * FROM unnest(%(records)s::uuid[], %(proposals)s::uuid[])
ON CONFLICT (record_id) DO NOTHING

-- name: proposal_corroborate
-- Corroborations of pending proposals, one per (proposal, actor, rank) row: the count grows by one a row, the actor joins the corroborators, the sensitivity rises to the highest rank (RFC 5.7, 7.4).
UPDATE proposals p
   SET corroborations = p.corroborations + c.n,
       actors = ARRAY(SELECT DISTINCT a FROM unnest(p.actors || c.actors) a ORDER BY a),
       sensitivity = CASE WHEN c.rank > p.sensitivity_rank
                          THEN (ARRAY['public','low','medium','high','hyper'])[c.rank + 1]
                          ELSE p.sensitivity END
  FROM (SELECT u.id, count(*) AS n, array_agg(u.actor) AS actors, max(u.rank) AS rank
          FROM unnest(%(ids)s::uuid[], %(actors)s::text[], %(ranks)s::int[]) AS u(id, actor, rank)
         GROUP BY u.id) c
 WHERE p.id = c.id AND p.status = 'pending'

-- name: proposal_of_records
-- The pending proposal of each record among ids that has one (RFC 5.7).
SELECT pr.record_id, pr.proposal_id
  FROM proposal_records pr JOIN proposals p ON p.id = pr.proposal_id
 WHERE pr.record_id = ANY(%(ids)s::uuid[]) AND p.status = 'pending'

-- name: proposal_lock
-- One proposal, locked for its decision (RFC 5.7).
SELECT p.id, p.scope, p.sensitivity, p.source, p.proposed_by, p.actors, p.corroborations, p.status,
       p.created_at, p.expires_at, p.decided_by, p.decided_at, p.rationale
  FROM proposals p WHERE p.id = %(id)s FOR UPDATE

-- name: proposal_record_ids
-- The records of a proposal, by id (RFC 5.7).
SELECT pr.record_id FROM proposal_records pr WHERE pr.proposal_id = %(id)s ORDER BY pr.record_id

-- name: proposal_decide
-- A proposal's outcome, its reviewer, time and rationale (RFC 5.7).
UPDATE proposals
   SET status = %(outcome)s, decided_by = %(actor)s, decided_at = %(now)s, rationale = %(rationale)s
 WHERE id = %(id)s AND status = 'pending'

-- name: review_settle
-- The records of a decided proposal: each still proposed takes the decision's status (retracted with the decision's time), and every one the decision's time as proposed_until (RFC 5.7, 5.6).
UPDATE memory_records
   SET status = CASE WHEN status = 'proposed' THEN %(status)s ELSE status END,
       retracted_at = CASE WHEN status = 'proposed' AND %(status)s = 'retracted' THEN %(now)s
                           ELSE retracted_at END,
       proposed_until = coalesce(proposed_until, %(now)s),
       updated_at = %(now)s
 WHERE id = ANY(%(ids)s::uuid[])

-- name: review_queue_age
-- A keyset page of pending proposals the caller may decide, oldest first: in its scopes, at most its level, proposed or corroborated by another actor (RFC 5.7).
SELECT p.id, p.scope, p.sensitivity, p.source, p.proposed_by, p.actors, p.corroborations, p.status,
       p.created_at, p.expires_at, p.decided_by, p.decided_at, p.rationale
  FROM proposals p
 WHERE p.status = 'pending'
   AND (%(all_scopes)s OR p.scope = ANY(%(scopes)s::text[]))
   AND p.sensitivity_rank <= %(max_rank)s
   AND NOT (%(actor)s = ANY(p.actors))
   AND (%(after_created)s::timestamptz IS NULL
        OR (p.created_at, p.id) > (%(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY p.created_at, p.id
 LIMIT %(limit)s

-- name: review_queue_corroboration
-- A keyset page of pending proposals the caller may decide, most corroborated first, then oldest (RFC 5.7).
SELECT p.id, p.scope, p.sensitivity, p.source, p.proposed_by, p.actors, p.corroborations, p.status,
       p.created_at, p.expires_at, p.decided_by, p.decided_at, p.rationale
  FROM proposals p
 WHERE p.status = 'pending'
   AND (%(all_scopes)s OR p.scope = ANY(%(scopes)s::text[]))
   AND p.sensitivity_rank <= %(max_rank)s
   AND NOT (%(actor)s = ANY(p.actors))
   AND (%(after_created)s::timestamptz IS NULL
        OR (-p.corroborations, p.created_at, p.id)
           > (-%(after_count)s::int, %(after_created)s::timestamptz, %(after_id)s::uuid))
 ORDER BY p.corroborations DESC, p.created_at, p.id
 LIMIT %(limit)s

-- name: review_members
-- The records of proposals, each with its proposal (RFC 5.7).
SELECT pr.proposal_id, pr.record_id FROM proposal_records pr
 WHERE pr.proposal_id = ANY(%(ids)s::uuid[]) ORDER BY pr.proposal_id, pr.record_id

-- name: review_expired
-- Up to limit pending proposals past their expiry, oldest expiry first; each is locked, and checked again, after the keys of the batch (RFC 5.7, 5.4).
SELECT p.id FROM proposals p
 WHERE p.status = 'pending' AND p.expires_at <= %(now)s
 ORDER BY p.expires_at, p.id
 LIMIT %(limit)s

-- name: review_queue_gauges
-- Pending proposals by scope: how many and the oldest (RFC 14.2).
SELECT p.scope, count(*) AS depth, min(p.created_at) AS oldest
  FROM proposals p WHERE p.status = 'pending' GROUP BY p.scope ORDER BY p.scope

-- name: review_decisions_count
-- Decided proposals by outcome (RFC 14.2).
SELECT p.status, count(*) FROM proposals p WHERE p.status <> 'pending' GROUP BY p.status

-- name: review_conflicts_many
-- For each proposed fact: the active facts of its scope with its subject and predicate and another object, at levels up to max_rank (RFC 5.7).
SELECT f.id AS fact_id, r.id
  FROM unnest(%(ids)s::uuid[], %(scopes)s::text[], %(subjects)s::text[], %(predicates)s::text[],
              %(objects)s::text[]) AS f(id, scope, subject, predicate, object)
  JOIN memory_records r
    ON r.type = 'semantic' AND r.scope = f.scope AND r.fact_subject = f.subject
   AND r.fact_predicate = f.predicate AND r.fact_object <> f.object AND r.status = 'active'
   AND r.sensitivity_rank <= %(max_rank)s
 ORDER BY f.id, r.id

-- name: review_sources
-- The records each fact among ids derives from (its source episodes, RFC 3.4, 5.7).
SELECT l.source_id, l.target_id FROM relations l
 WHERE l.source_id = ANY(%(ids)s::uuid[]) AND l.predicate = 'derived_from'
 ORDER BY l.source_id, l.created_at, l.target_id
