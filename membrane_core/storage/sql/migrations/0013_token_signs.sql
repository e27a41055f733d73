-- Late interaction (RFC 8.2.3): each embedded record keeps the sign bits of its token
-- vectors beside its vector. Nullable and without a default, so adding it rewrites nothing;
-- records embedded before have none until they are embedded again, and rank without it.
ALTER TABLE record_embeddings ADD COLUMN token_signs bytea;
