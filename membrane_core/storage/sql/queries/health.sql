-- name: health_ping
-- Readiness probe: the server answers a trivial query (RFC 14.2).
SELECT 1

-- name: replica_primary_position
-- The primary's WAL insert position (RFC 13.2): read after a write committed, it is at or past the write's commit record, so it is the write's consistency token; the replica monitor compares the replica's replay with it.
SELECT pg_current_wal_insert_lsn()::text

-- name: replica_replay
-- A standby's replayed WAL position and the seconds since its last replayed transaction committed on the primary (RFC 13.2); the position is NULL on a server that is not in recovery.
SELECT pg_last_wal_replay_lsn()::text, extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8

-- name: replica_replayed
-- Whether this standby has replayed a consistency token's position (RFC 13.2).
SELECT pg_last_wal_replay_lsn() >= %(lsn)s::pg_lsn

-- name: standby_slot_active
-- Whether a standby streams through the named replication slot of this primary (RFC 13.2).
SELECT active FROM pg_replication_slots WHERE slot_name = %(slot)s

-- name: standby_drop_slot
-- Remove the named replication slot of a standby that is gone, so the primary recycles its WAL again (RFC 13.2).
SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %(slot)s

-- name: transaction_unbounded
-- Lift the role's statement timeout for this transaction alone (RFC 10.5): an import or an erasure runs statements as long as its data.
SET LOCAL statement_timeout = 0
