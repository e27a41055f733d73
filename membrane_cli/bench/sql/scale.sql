-- The store of `membrane bench scale`: what a pipeline writes besides the records, and what the store costs (RFC 14.1).

-- name: scale_copy_audit
-- Bulk load of the create entry a capture writes for each synthetic record (RFC 5.5); the chain trigger hashes each.
COPY audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details) FROM STDIN

-- name: scale_copy_work
-- Bulk load of each synthetic record's decay checkpoint, due one half-life after it was written, as a capture schedules it (RFC 6.1, 9.3).
COPY work_items (kind, target_id, due_at) FROM STDIN

-- name: scale_records
-- Rows of memory_records (the denominator of the bytes per record).
SELECT count(*) FROM memory_records

-- name: scale_table_bytes
-- Bytes of each of the project's tables (partitions summed into their parent): heap with TOAST, free space and visibility maps, and all its indexes.
SELECT coalesce(p.relname, c.relname)::text AS name,
       sum(pg_table_size(c.oid))::bigint AS heap,
       sum(pg_indexes_size(c.oid))::bigint AS indexes
  FROM pg_class c
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
  LEFT JOIN pg_class p ON p.oid = i.inhparent
 WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
 GROUP BY 1
 ORDER BY sum(pg_table_size(c.oid)) + sum(pg_indexes_size(c.oid)) DESC

-- name: scale_index_bytes
-- Bytes of each index of the project's tables (a partition's index summed into its parent's).
SELECT coalesce(pi.relname, ci.relname)::text AS name,
       coalesce(pt.relname, ct.relname)::text AS table_name,
       sum(pg_relation_size(ci.oid))::bigint AS bytes
  FROM pg_index x
  JOIN pg_class ci ON ci.oid = x.indexrelid
  JOIN pg_class ct ON ct.oid = x.indrelid
  LEFT JOIN pg_inherits ii ON ii.inhrelid = ci.oid
  LEFT JOIN pg_class pi ON pi.oid = ii.inhparent
  LEFT JOIN pg_inherits it ON it.inhrelid = ct.oid
  LEFT JOIN pg_class pt ON pt.oid = it.inhparent
 WHERE ct.relnamespace = 'public'::regnamespace AND ct.relkind = 'r'
 GROUP BY 1, 2
 ORDER BY 3 DESC

-- name: scale_autovacuum
-- Autovacuum's work on each of the project's tables (partitions summed into their parent): live and dead rows, runs, the last run.
SELECT coalesce(p.relname, s.relname)::text AS name,
       sum(s.n_live_tup)::bigint AS live,
       sum(s.n_dead_tup)::bigint AS dead,
       sum(s.autovacuum_count)::bigint AS autovacuums,
       sum(s.autoanalyze_count)::bigint AS autoanalyzes,
       max(s.last_autovacuum) AS last_autovacuum
  FROM pg_stat_user_tables s
  LEFT JOIN pg_inherits i ON i.inhrelid = s.relid
  LEFT JOIN pg_class p ON p.oid = i.inhparent
 WHERE s.schemaname = 'public'
 GROUP BY 1
 ORDER BY 3 DESC, 4 DESC, 1

-- name: scale_vacuum_progress
-- Vacuums running now in this database (autovacuum's or another's): table, phase, heap blocks scanned of the total.
SELECT v.relid::regclass::text AS name, v.phase, v.heap_blks_scanned, v.heap_blks_total
  FROM pg_stat_progress_vacuum v
 WHERE v.datname = current_database()

-- name: scale_scope_records
-- Records of one scope, by the listing index: the size of the scope a list page is read from.
SELECT count(*) FROM memory_records WHERE scope = %(scope)s
