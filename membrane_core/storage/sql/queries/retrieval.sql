-- Retrieval reads (RFC 8). Every block filters scope, sensitivity (at most one level above the
-- caller's maximum: such rows are returned redacted), transaction time (as_of), valid time
-- (valid_at) and revision status in SQL; the service checks each hydrated row again.

-- retrieval_roots is written as its parts, included in order: one file per part under
-- retrieval/ (full text, vector, entity, salience, fusion, adjacent episodes, bounds, hop,
-- and the filters they share), each part a fragment holding CTEs whose last one the
-- statement closes.

-- name: retrieval_scan_settings
-- Per-transaction settings of a retrieval: iterative HNSW scans so that filters do not starve results (RFC 8.1), generic plans, no parallel workers (RFC 8.1.5).
SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('hnsw.ef_search', %(ef_search)s::text, true),
       set_config('hnsw.max_scan_tuples', %(max_scan_tuples)s::text, true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('max_parallel_workers_per_gather', '0', true)

-- name: retrieval_roots
-- Hybrid retrieval in one statement: the candidate pool of the vector, full-text (BM25), entity and salience arms with every feature (RFC 8.1), fused (8.2), cut by rows and projected bytes, and what fits hydrated (8.3); with late interaction, every pool row's id and token signs (8.2.3).
WITH /*@fulltext_frequencies*/
)/*?has_tags*/, /*@vector_tagged*/
)/*?end*/, /*@vector_arm*/
), /*@fulltext_arm*/
), /*@entity_arm*/
)/*?!has_query*/, /*@salience_bar*/
), /*@salience_ranges*/
)/*?end*//*?has_query*/, /*@salience_none*/
)/*?end*/, /*@fusion*/
)/*?adjacent*/, /*@adjacent*/
)/*?end*/, /*@bounds*/
)/*?hop*/, /*@hop_first*/
), /*@hop_ctes*//*?end*/
SELECT 'root' AS kind, b.ord, b.bytes, b.running, (b.running <= %(max_bytes)s) AS fits, b.score,
       b.status AS status_as_of, b.vector_score, b.text_score, b.entity_score,
       b.salience AS salience_now, b.pool_size, b.n_vector, b.n_text, b.n_entity,
       NULL AS source_id, NULL AS predicate, NULL AS target_id, NULL AS other,
       NULL AS other_scope, NULL AS other_sensitivity, NULL AS other_status, NULL AS n,
       NULL AS hydrated,
       /*@record_fields*/,
       /*@visible_relations*/ AS relations/*?late*/,
       -- RFC 8.2.3: every pool row's id, and the token signs of those that fit, for the
       -- re-ranking (never with the first hop, whose rows do not have these two columns)
       b.id AS pool_id,
       (SELECT e.token_signs FROM %(embeddings)s e
         WHERE e.scope = r.scope AND e.record_id = r.id) AS token_signs/*?end*/
  FROM bounded b
  LEFT JOIN memory_records r ON r.id = b.id AND b.running <= %(max_bytes)s
  LEFT JOIN record_payloads p ON p.record_id = r.id
/*?hop*/UNION ALL
SELECT 'hop', NULL, h.bytes, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, /*@hop_columns*/
  /*@hop_from*/
/*?end*/ ORDER BY kind DESC, ord, n

-- name: retrieval_access
-- Scope, sensitivity and status (as of a time) of records by id, for trust checks (RFC 7.3).
SELECT id, scope, sensitivity,
       status_at(status, retracted_at, contested_at, %(as_of)s::timestamptz, proposed_until) AS status
  FROM memory_records WHERE id = ANY(%(ids)s::uuid[])
