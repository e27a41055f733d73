-- record_embeddings becomes PARTITION BY HASH (scope), 16 partitions, each with its own HNSW
-- graph (RFC 13.2). The rows move over with their record's scope; the indexes are built after
-- the copy, once per partition.

ALTER TABLE record_embeddings RENAME TO record_embeddings_unpartitioned;
ALTER INDEX record_embeddings_pkey RENAME TO record_embeddings_unpartitioned_pkey;
ALTER INDEX record_embeddings_hnsw RENAME TO record_embeddings_unpartitioned_hnsw;

CREATE TABLE record_embeddings (
    record_id  uuid NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
    scope      text NOT NULL,
    model      text NOT NULL,
    embedding  vector(__EMBEDDING_DIM__) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, record_id)
) PARTITION BY HASH (scope);
CREATE TABLE record_embeddings_p0 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 0);
CREATE TABLE record_embeddings_p1 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 1);
CREATE TABLE record_embeddings_p2 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 2);
CREATE TABLE record_embeddings_p3 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 3);
CREATE TABLE record_embeddings_p4 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 4);
CREATE TABLE record_embeddings_p5 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 5);
CREATE TABLE record_embeddings_p6 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 6);
CREATE TABLE record_embeddings_p7 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 7);
CREATE TABLE record_embeddings_p8 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 8);
CREATE TABLE record_embeddings_p9 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 9);
CREATE TABLE record_embeddings_p10 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 10);
CREATE TABLE record_embeddings_p11 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 11);
CREATE TABLE record_embeddings_p12 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 12);
CREATE TABLE record_embeddings_p13 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 13);
CREATE TABLE record_embeddings_p14 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 14);
CREATE TABLE record_embeddings_p15 PARTITION OF record_embeddings FOR VALUES WITH (MODULUS 16, REMAINDER 15);

INSERT INTO record_embeddings (record_id, scope, model, embedding, created_at)
SELECT e.record_id, r.scope, e.model, e.embedding, e.created_at
  FROM record_embeddings_unpartitioned e
  JOIN memory_records r ON r.id = e.record_id;
DROP TABLE record_embeddings_unpartitioned;

CREATE INDEX record_embeddings_hnsw ON record_embeddings USING hnsw (embedding vector_cosine_ops);
CREATE INDEX record_embeddings_record ON record_embeddings (record_id);
