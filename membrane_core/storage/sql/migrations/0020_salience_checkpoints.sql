-- The decay checkpoint in a narrow row of its own (RFC 6.1): refreshing it in the record's
-- row wrote a new version of the whole row, which seldom fit its page, and so an entry in
-- each of its ten indexes, both GIN indexes included. Salience stored so far stays in
-- memory_records.salience, which a read takes where no checkpoint holds (stored_salience).
CREATE TABLE salience_checkpoints (
    record_id     uuid PRIMARY KEY REFERENCES memory_records (id) ON DELETE CASCADE,
    salience      double precision NOT NULL,
    base_salience double precision NOT NULL,
    reinforced_at timestamptz NOT NULL
) WITH (fillfactor = 70);
