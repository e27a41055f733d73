-- name: scratch_create
-- A session-local table shaped like one accepted capture: the ingest benchmark's COPY target (RFC 14.1).
CREATE TEMP TABLE IF NOT EXISTS bench_scratch (
    id         uuid PRIMARY KEY,
    kind       text NOT NULL,
    scope      text NOT NULL,
    request    jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)

-- name: scratch_copy
-- Bulk-load rows into the scratch table (RFC 14.1).
COPY bench_scratch (id, kind, scope, request) FROM STDIN
