-- A capture's fact meets only facts at its own sensitivity (RFC 3.4: polyinstantiation),
-- so a writer never learns of a fact it may not read by observing its key. A tombstone
-- therefore binds the retracted record's level and every level above it, not every level:
-- the backstop trigger refuses a fact under a tombstone of its level or below. Tombstones
-- keep the least sensitive retraction of a key (revision_insert_tombstones).
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
        -- a tombstone binds the retracted record's level and every level above it (RFC 3.4);
        -- a tombstone whose record is gone binds every level (generated columns are not
        -- computed yet in a BEFORE trigger, hence the rank from NEW.sensitivity)
        IF EXISTS (SELECT 1 FROM fact_tombstones t
                    WHERE t.scope = NEW.scope AND t.subject = NEW.fact_subject
                      AND t.predicate = NEW.fact_predicate AND t.object = NEW.fact_object
                      AND coalesce((SELECT x.sensitivity_rank FROM memory_records x
                                     WHERE x.id = t.record_id), -1)
                          <= array_position(ARRAY['public','low','medium','high','hyper'],
                                            NEW.sensitivity) - 1) THEN
            RAISE EXCEPTION 'fact (%, %, %) is tombstoned in scope %', NEW.fact_subject,
                NEW.fact_predicate, NEW.fact_object, NEW.scope USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END $$;
