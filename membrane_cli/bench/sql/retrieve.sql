-- Synthetic data and the bare baseline for `membrane bench retrieve` (RFC 8, RFC 14.1).

-- name: bench_drop_search_indexes
-- Drop the HNSW and GIN indexes of a dedicated benchmark database before a bulk load.
DROP INDEX IF EXISTS record_embeddings_hnsw, memory_records_tsv, memory_records_scoped_tsv

-- name: bench_create_gin
-- Re-create the full-text index exactly as schema.sql defines it.
CREATE INDEX IF NOT EXISTS memory_records_tsv ON memory_records USING gin (search_tsv)

-- name: bench_create_scoped_gin
-- Re-create the index of scoped lexemes exactly as schema.sql defines it.
CREATE INDEX IF NOT EXISTS memory_records_scoped_tsv ON memory_records USING gin (scoped_lexemes(scope, search_tsv))

-- name: bench_create_hnsw
-- Re-create the HNSW index exactly as schema.sql defines it.
CREATE INDEX IF NOT EXISTS record_embeddings_hnsw ON record_embeddings USING hnsw (embedding vector_cosine_ops)

-- name: bench_build_settings
-- Memory and parallelism for index builds in this session.
SELECT set_config('maintenance_work_mem', '4GB', false),
       set_config('max_parallel_maintenance_workers', '2', false)

-- name: bench_copy_records
-- Bulk load of synthetic records (the columns without defaults).
COPY memory_records (id, type, scope, sensitivity, confidence, salience, half_life_seconds,
    min_salience, base_salience, reinforced_at, deletion_policy, recorded_at, created_at,
    updated_at, summary, projected_bytes, search_text) FROM STDIN

-- name: bench_copy_payloads
-- Bulk load of synthetic payloads, plain or sealed (RFC 7.6).
COPY record_payloads (record_id, kind, body, key_id, sealed) FROM STDIN

-- name: bench_copy_embeddings
-- Bulk load of synthetic embeddings (binary COPY), with each record's scope (the partition key).
COPY record_embeddings (record_id, scope, model, embedding) FROM STDIN WITH (FORMAT BINARY)

-- name: bench_copy_tags
-- Bulk load of synthetic tags.
COPY record_tags (record_id, tag) FROM STDIN

-- name: bench_copy_provenance
-- Bulk load of synthetic provenance sources (one per record, as a capture writes).
COPY provenance_sources (record_id, kind, ref, hash, created_by, ts) FROM STDIN

-- name: bench_copy_relations
-- Bulk load of synthetic relations.
COPY relations (source_id, predicate, target_id) FROM STDIN

-- name: bench_copy_entity_terms
-- Bulk load of synthetic entity terms.
COPY entity_terms (record_id, scope, term, term_kind) FROM STDIN

-- name: bench_count
-- Records already loaded.
SELECT count(*) FROM memory_records

-- name: bench_bare_vector
-- Baseline: bare pgvector top-k under the same scope filter and iterative scan (the scope is a
-- column of record_embeddings, its partition key: RFC 13.2).
SELECT e.record_id
  FROM record_embeddings e
 WHERE e.scope = %(scope)s
 ORDER BY e.embedding <=> %(qvec)s::vector
 LIMIT %(k)s

-- name: bench_analyze
-- Planner statistics after the bulk load.
ANALYZE

-- name: bench_database_exists
-- Whether a database of this name exists on the server.
SELECT 1 FROM pg_database WHERE datname = %(name)s

-- name: bench_shared_buffers
-- Give the benchmark's own embedded server room for the HNSW index (applies after a restart).
-- ALTER SYSTEM takes no bind parameter: {size} is a psycopg.sql.Literal (load.shared_buffers).
ALTER SYSTEM SET shared_buffers = {size}

-- name: bench_show_shared_buffers
-- The server's current shared_buffers.
SELECT current_setting('shared_buffers')

-- name: bench_database_files
-- The folder of the benchmark database's files on the server's disk.
SELECT current_setting('data_directory') || '/base/' || d.oid::text
  FROM pg_database d WHERE d.datname = current_database()

-- name: bench_create_copy
-- A copy of a loaded benchmark database on the same server (RFC 5.7, 14.1: the store with a share proposed).
-- CREATE DATABASE takes no bind parameter: {name} and {template} are psycopg.sql.Identifier (load.create_database).
CREATE DATABASE {name} TEMPLATE {template}

-- name: bench_propose
-- RFC 5.7: mark %(n)s records proposed, chosen by a hash of their ids whatever their type (the same records for the same ids).
UPDATE memory_records SET status = 'proposed'
 WHERE id IN (SELECT id FROM memory_records ORDER BY md5(id::text), id LIMIT %(n)s)

-- name: bench_vacuum_records
-- Remove the dead row versions of an update and refresh the records' statistics (outside a transaction).
VACUUM (ANALYZE) memory_records

-- name: bench_proposed_ids
-- The ids of the proposed records (RFC 5.7).
SELECT id FROM memory_records WHERE status = 'proposed'
