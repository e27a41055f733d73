-- Review (RFC 5.7): the proposed status, the time a proposal was decided (status_at reads it),
-- proposals with their records, and the audit action of a decision.
ALTER TABLE memory_records DROP CONSTRAINT memory_records_status_check;
ALTER TABLE memory_records ADD CONSTRAINT memory_records_status_check
    CHECK (status IN ('active','contested','retracted','proposed'));
ALTER TABLE memory_records ADD COLUMN proposed_until timestamptz;

CREATE FUNCTION status_at(status text, retracted timestamptz, contested timestamptz, at timestamptz,
                          proposed_until timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN at IS NULL THEN status
                WHEN retracted <= at OR (status = 'retracted' AND retracted IS NULL) THEN 'retracted'
                WHEN status = 'proposed' OR proposed_until > at THEN 'proposed'
                WHEN contested <= at OR (status = 'contested' AND contested IS NULL) THEN 'contested'
                ELSE 'active'
           END
$$;
DROP FUNCTION status_at(text, timestamptz, timestamptz, timestamptz);

CREATE TABLE proposals (
    id              uuid PRIMARY KEY,
    scope           text NOT NULL,
    sensitivity     text NOT NULL CHECK (sensitivity IN ('public','low','medium','high','hyper')),
    sensitivity_rank smallint GENERATED ALWAYS AS (
        CASE sensitivity WHEN 'public' THEN 0 WHEN 'low' THEN 1 WHEN 'medium' THEN 2
                         WHEN 'high' THEN 3 ELSE 4 END) STORED,
    source          text NOT NULL CHECK (source IN ('capture','extraction')),
    proposed_by     text NOT NULL,
    actors          text[] NOT NULL,
    corroborations  integer NOT NULL DEFAULT 0 CHECK (corroborations >= 0),
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending','approved','rejected','amended','expired')),
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    decided_by      text,
    decided_at      timestamptz,
    rationale       text
);
CREATE INDEX proposals_pending ON proposals (scope, created_at, id) WHERE status = 'pending';
CREATE INDEX proposals_expiry ON proposals (expires_at) WHERE status = 'pending';
CREATE INDEX proposals_decided ON proposals (status) WHERE status <> 'pending';

CREATE TABLE proposal_records (
    record_id   uuid PRIMARY KEY REFERENCES memory_records (id) ON DELETE CASCADE,
    proposal_id uuid NOT NULL REFERENCES proposals (id) ON DELETE CASCADE
);
CREATE INDEX proposal_records_proposal ON proposal_records (proposal_id);

ALTER TABLE audit_log DROP CONSTRAINT audit_log_action_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_check
    CHECK (action IN ('create','revise','fork','merge','delete','reinforce','decay','requeue','review'));
