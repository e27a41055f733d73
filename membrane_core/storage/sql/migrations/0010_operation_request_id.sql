-- The request that submitted each operation (RFC 9.1, 14.3): the request id its API log
-- lines and its worker's log lines carry. Nullable without a default, so adding it rewrites
-- no row; operations from before this migration, and those submitted outside the API,
-- have none.
ALTER TABLE operations ADD COLUMN request_id text CHECK (length(request_id) <= 128);
