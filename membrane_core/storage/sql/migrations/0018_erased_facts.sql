-- Erasure (RFC 15.4): the fact keys of erased records, kept as digests, so that no writer
-- creates the fact again; the guard refuses them as it refuses tombstoned facts.
CREATE FUNCTION fact_key_digest(subject text, predicate text, object text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT sha256(convert_to(subject || chr(31) || predicate || chr(31) || object, 'UTF8'))
$$;

CREATE TABLE erased_facts (
    scope      text NOT NULL,
    key_digest bytea NOT NULL,
    erasure_id uuid NOT NULL REFERENCES erasures (id),
    PRIMARY KEY (scope, key_digest)
);

CREATE OR REPLACE FUNCTION memory_records_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.status = 'retracted' AND NEW.status <> 'retracted' THEN
            RAISE EXCEPTION 'record % is retracted; retraction is final (re-assert it with a revision)',
                OLD.id USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.type = 'semantic' AND NEW.status <> 'retracted' THEN
        -- a tombstone binds its own level (RFC 3.4, 5.4), or every level (-1); generated
        -- columns are not computed yet in a BEFORE trigger, hence the rank from NEW.sensitivity
        IF EXISTS (SELECT 1 FROM fact_tombstones t
                    WHERE t.scope = NEW.scope AND t.subject = NEW.fact_subject
                      AND t.predicate = NEW.fact_predicate AND t.object = NEW.fact_object
                      AND t.sensitivity_rank IN (-1, array_position(
                              ARRAY['public','low','medium','high','hyper'], NEW.sensitivity) - 1)) THEN
            RAISE EXCEPTION 'fact (%, %, %) is tombstoned in scope %', NEW.fact_subject,
                NEW.fact_predicate, NEW.fact_object, NEW.scope USING ERRCODE = 'check_violation';
        END IF;
        -- RFC 15.4: an erased fact binds every level, and is named by nothing but its scope
        IF EXISTS (SELECT 1 FROM erased_facts e
                    WHERE e.scope = NEW.scope
                      AND e.key_digest = fact_key_digest(NEW.fact_subject, NEW.fact_predicate, NEW.fact_object)) THEN
            RAISE EXCEPTION 'a fact of scope % was erased and may not be written again', NEW.scope
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END $$;
