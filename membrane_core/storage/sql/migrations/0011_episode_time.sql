-- Episodes of a scope in time order (RFC 8.2.1): retrieval reads the episodes adjacent to
-- its best ones before and after them in (occurred_at, id) order, a few index probes each.
CREATE INDEX memory_records_episode_time ON memory_records (scope, occurred_at, id)
    WHERE type = 'episodic';
