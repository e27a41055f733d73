-- $1 as_of, $2 ids
SELECT id, scope, sensitivity,
       status_at(status, retracted_at, contested_at, $1::timestamptz, proposed_until) AS status
  FROM memory_records WHERE id = ANY($2::uuid[])
