-- When each provenance source was added to its record (RFC 5.6): a read as of T shows
-- only the sources added by T, so a fact reinforced after T does not name, as of T, the
-- capture that reinforced it. Rows from before this migration have none and are shown
-- at every T.
ALTER TABLE provenance_sources ADD COLUMN added_at timestamptz;
