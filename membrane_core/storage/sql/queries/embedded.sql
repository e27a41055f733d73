-- name: embedded_shared_buffers
-- The embedded server's buffer cache: 1 GB, taking effect at the restart after initdb (RFC 11.2).
ALTER SYSTEM SET shared_buffers = '1GB'

-- name: embedded_max_wal_size
-- Fewer forced checkpoints under sustained ingest (RFC 11.2).
ALTER SYSTEM SET max_wal_size = '4GB'

-- name: embedded_checkpoint_timeout
-- Checkpoint at most every 15 minutes on time (RFC 11.2).
ALTER SYSTEM SET checkpoint_timeout = '15min'

-- name: embedded_wal_compression
-- Compress full-page images in the WAL (RFC 11.2).
ALTER SYSTEM SET wal_compression = 'on'

-- name: embedded_autovacuum_naptime
-- Look for tables to analyse every 10 s: a store filling from empty gets statistics in its first minute (RFC 11.2).
ALTER SYSTEM SET autovacuum_naptime = '10s'

-- name: embedded_uptime
-- When the running server started and for how long it has run, by its own clock (RFC 11.2).
SELECT pg_postmaster_start_time() AS started_at, now() - pg_postmaster_start_time() AS uptime

-- name: embedded_database_sizes
-- The size on disk of every database but the templates, by name (RFC 11.2).
SELECT datname AS name, pg_database_size(datname) AS size_bytes
FROM pg_database
WHERE NOT datistemplate
ORDER BY datname
