-- Erasable audit content (RFC 5.5, 15.4): an entry's chain hash covers a digest of its
-- rationale and details instead of their text, so an erasure can blank the text and every
-- chain still verifies. Existing entries get their digest and are chained again in append
-- order under the new formula. Erasures are recorded without content (who, when, why, what
-- kind of target and its digest, counts).
CREATE TABLE erasures (
    id            uuid PRIMARY KEY,
    actor         text NOT NULL,
    reason        text NOT NULL,
    target_kind   text NOT NULL CHECK (target_kind IN ('scope','entity','records')),
    target_digest bytea NOT NULL,
    counts        jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE audit_log ADD COLUMN content_digest bytea;
ALTER TABLE audit_log ADD COLUMN erased_by uuid REFERENCES erasures (id);

CREATE FUNCTION audit_content_digest(why text, det jsonb) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT sha256(convert_to(why || chr(31) || det::text, 'UTF8'))
$$;

CREATE FUNCTION audit_entry_hash(prev bytea, rec uuid, act text, who text, at timestamptz,
                                 digest bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT sha256(coalesce(prev, ''::bytea) || convert_to(
        rec::text || chr(31) || act || chr(31) || who || chr(31) ||
        to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || chr(31) ||
        encode(digest, 'hex'), 'UTF8'))
$$;

ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only;
UPDATE audit_log SET content_digest = audit_content_digest(rationale, details);
DO $$
DECLARE
    e record;
    prev bytea;
    last uuid;
    h bytea;
BEGIN
    FOR e IN SELECT id, record_id, action, actor, ts, content_digest FROM audit_log ORDER BY record_id, id LOOP
        IF last IS DISTINCT FROM e.record_id THEN
            prev := NULL;
            last := e.record_id;
        END IF;
        h := audit_entry_hash(prev, e.record_id, e.action, e.actor, e.ts, e.content_digest);
        UPDATE audit_log SET prev_hash = prev, hash = h WHERE id = e.id;
        prev := h;
    END LOOP;
END $$;
ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only;
ALTER TABLE audit_log ALTER COLUMN content_digest SET NOT NULL;
DROP FUNCTION audit_entry_hash(bytea, uuid, text, text, timestamptz, text, jsonb);

CREATE OR REPLACE FUNCTION audit_log_chain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT a.hash INTO NEW.prev_hash FROM audit_log a
     WHERE a.record_id = NEW.record_id ORDER BY a.id DESC LIMIT 1;
    -- an erased entry comes only from an import (RFC 15.2), blank, with the digest it
    -- was chained with and the erasure that blanked it; any other entry's digest is its own
    IF NEW.erased_by IS NULL OR NEW.content_digest IS NULL OR NEW.rationale <> ''
       OR NEW.details <> '{}'::jsonb THEN
        NEW.content_digest := audit_content_digest(NEW.rationale, NEW.details);
        NEW.erased_by := NULL;
    END IF;
    NEW.hash := audit_entry_hash(NEW.prev_hash, NEW.record_id, NEW.action, NEW.actor, NEW.ts,
                                 NEW.content_digest);
    RETURN NEW;
END $$;

-- The one change an entry admits: an erasure blanks its rationale and details, once, and
-- names itself (RFC 15.4); everything the chain covers stays as it was.
CREATE OR REPLACE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.erased_by IS NULL AND NEW.erased_by IS NOT NULL
       AND NEW.rationale = '' AND NEW.details = '{}'::jsonb
       AND (NEW.id, NEW.record_id, NEW.scope, NEW.sensitivity, NEW.action, NEW.actor, NEW.ts,
            NEW.content_digest, NEW.prev_hash, NEW.hash)
           IS NOT DISTINCT FROM
           (OLD.id, OLD.record_id, OLD.scope, OLD.sensitivity, OLD.action, OLD.actor, OLD.ts,
            OLD.content_digest, OLD.prev_hash, OLD.hash) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;

-- RFC 15.4: an erasure's entry on each record it erased; RFC 15.2: an import's entry on a
-- record it overwrote.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_action_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_action_check
    CHECK (action IN ('create','revise','fork','merge','delete','reinforce','decay','requeue','review',
                      'erase','import'));
