-- name: health_ping
-- Readiness probe: the server answers a trivial query (RFC 14.2).
SELECT 1
