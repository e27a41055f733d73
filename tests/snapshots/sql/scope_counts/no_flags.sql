-- $1 all_scopes, $2 scopes, $3 max_rank, $4 limit
SELECT r.scope, count(*) AS records,
       count(*) FILTER (WHERE r.status = 'active') AS active,
       count(*) FILTER (WHERE r.status = 'contested') AS contested,
       count(*) FILTER (WHERE r.status = 'retracted') AS retracted,
       count(*) FILTER (WHERE r.status = 'proposed') AS proposed
  FROM memory_records r
 WHERE ($1 OR r.scope = ANY($2::text[])) AND r.sensitivity_rank <= $3 + 1
 GROUP BY r.scope ORDER BY r.scope
 LIMIT $4
