-- The decay checkpoint in a narrow row of its own (RFC 6.1): the refresh rewrote the record's
-- whole row, and as the row seldom fits its page again, added an entry to each of its ten
-- indexes, both GIN indexes included. A record's stored salience so far stays where it is.
-- The decay batch's checkpoint of a record's salience (RFC 6.1), in a narrow row of its own:
-- refreshing it rewrites neither the record's row (about 1.2 KB) nor any of its ten indexes.
-- It holds while the record keeps the base salience and clock it was computed from; a write
-- that changes either sets memory_records.salience, which is read instead (stored_salience).
CREATE TABLE salience_checkpoints (
    record_id     uuid PRIMARY KEY REFERENCES memory_records (id) ON DELETE CASCADE,
    salience      double precision NOT NULL,
    base_salience double precision NOT NULL,
    reinforced_at timestamptz NOT NULL
) WITH (fillfactor = 70);
