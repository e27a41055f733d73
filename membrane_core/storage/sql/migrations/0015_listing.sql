-- Lists (RFC 10.7): one scope's records newest first read in index order, keyset pages of
-- buried work items, and the audit entry of a requeued item.
CREATE INDEX memory_records_listing ON memory_records (scope, created_at, id);
CREATE INDEX work_items_buried ON work_items (id) WHERE dead;
ALTER TABLE audit_log DROP CONSTRAINT audit_log_action_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_check
    CHECK (action IN ('create','revise','fork','merge','delete','reinforce','decay','requeue'));
