-- Fact levels (RFC 3.4, 5.4). A capture's fact meets only facts at its own sensitivity
-- (polyinstantiation), and a tombstone binds only the level of the record it retracted,
-- kept in the row: levels are independent, so no writer is told, by a capture or by a
-- revision's re-assertion, of a retraction at a level it may not read, and a hard deletion
-- of the retracted record changes nothing. A tombstone whose record is already gone gets
-- -1: it binds every level, as every tombstone did before. The backstop trigger refuses a
-- fact under a tombstone of its level (or of every level).
ALTER TABLE fact_tombstones ADD COLUMN sensitivity_rank smallint NOT NULL DEFAULT -1;
UPDATE fact_tombstones t SET sensitivity_rank = x.sensitivity_rank
  FROM memory_records x WHERE x.id = t.record_id;
ALTER TABLE fact_tombstones ALTER COLUMN sensitivity_rank DROP DEFAULT;
ALTER TABLE fact_tombstones DROP CONSTRAINT fact_tombstones_pkey;
ALTER TABLE fact_tombstones ADD PRIMARY KEY (scope, subject, predicate, object, sensitivity_rank);
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
    END IF;
    RETURN NEW;
END $$;
