-- The guard runs only for the rows it can refuse (RFC 5.4, 15.4): a new semantic record that
-- is not retracted, and an update that takes a record out of retraction. Every other row, an
-- episode among them, skips the PL/pgSQL call (a capture's bulk insert paid it per row).
DROP TRIGGER memory_records_guard ON memory_records;
CREATE TRIGGER memory_records_guard BEFORE INSERT ON memory_records
    FOR EACH ROW WHEN (NEW.type = 'semantic' AND NEW.status <> 'retracted')
    EXECUTE FUNCTION memory_records_guard();
CREATE TRIGGER memory_records_unretract_guard BEFORE UPDATE OF status ON memory_records
    FOR EACH ROW WHEN (OLD.status = 'retracted' AND NEW.status <> 'retracted')
    EXECUTE FUNCTION memory_records_guard();
