-- search_tsv carries the record's scope as one extra lexeme, so that the full-text arm
-- intersects scope and query inside the GIN index (RFC 8.1.2). The column is re-generated,
-- which rewrites memory_records once, and its GIN index is rebuilt.

CREATE FUNCTION scope_lexeme(scope text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY['scope ' || md5(scope)])
$$;

CREATE FUNCTION scopes_tsquery(scopes text[]) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_agg(quote_literal('scope ' || md5(s)), ' | ')::tsquery FROM unnest(scopes) AS s
$$;

ALTER TABLE memory_records DROP COLUMN search_tsv;
ALTER TABLE memory_records ADD COLUMN search_tsv tsvector
    GENERATED ALWAYS AS (to_tsvector('english', search_text) || scope_lexeme(scope)) STORED;
CREATE INDEX memory_records_tsv ON memory_records USING gin (search_tsv);
