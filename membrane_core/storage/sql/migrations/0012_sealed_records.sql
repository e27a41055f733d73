-- Encryption at rest (RFC 7.6). A sealed record keeps its payload, summary, metadata and
-- tags in one AES-GCM ciphertext (``sealed``) that names its key (``key_id``), and no body;
-- ``seal`` work items re-encrypt records under the current key (rotation) and seal records
-- written before encryption was enabled.
ALTER TABLE record_payloads ALTER COLUMN body DROP NOT NULL;
ALTER TABLE record_payloads ADD COLUMN key_id text;
ALTER TABLE record_payloads ADD COLUMN sealed bytea;
ALTER TABLE record_payloads ADD CONSTRAINT record_payloads_check
    CHECK ((body IS NULL) = (sealed IS NOT NULL) AND (key_id IS NULL) = (sealed IS NULL));
CREATE INDEX record_payloads_key ON record_payloads (key_id) WHERE key_id IS NOT NULL;
ALTER TABLE work_items DROP CONSTRAINT work_items_kind_check;
ALTER TABLE work_items ADD CONSTRAINT work_items_kind_check
    CHECK (kind IN ('embed','extract','consolidate','compress','decay','prune','seal'));
