-- name: audit_entries
-- A record's audit entries in append order, with the exact text the content digest covers (RFC 5.5).
SELECT id, record_id, scope, sensitivity, action, actor, ts, rationale, details,
       details::text AS details_text, prev_hash, hash, content_digest, erased_by
  FROM audit_log
 WHERE record_id = %(id)s
 ORDER BY id

-- name: audit_lock_for_delete
-- Lock a record for hard deletion; FOR UPDATE also waits for writers that link to it (RFC 5.5).
SELECT id, type, scope, sensitivity, status, deletion_policy
  FROM memory_records
 WHERE id = %(id)s
   FOR UPDATE

-- name: audit_delete_record
-- Hard-delete a record; payload, tags, provenance, relations and embedding cascade, the audit log stays (RFC 5.5).
DELETE FROM memory_records WHERE id = %(id)s

-- name: audit_delete_work
-- Drop the background work of a deleted record (RFC 9.3).
DELETE FROM work_items WHERE target_id = %(id)s
