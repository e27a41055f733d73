-- The full-text arm of a retrieval for given scopes reads an index of scoped lexemes (RFC
-- 8.1.2): each lexeme of a record prefixed with a tag of its scope, so that a query's
-- posting lists hold only the records of the scopes asked for. With the scope lexeme alone
-- the GIN scan walked every scope's matches of the query's words (about 9,000 at 1,000,000
-- records over 20 scopes, for 460 in the one scope asked for). The index is on an
-- expression: the table is not rewritten; building it took 18 s at 1,000,000 records, during
-- which writes to memory_records wait (a migration runs in one transaction, where CREATE
-- INDEX CONCURRENTLY cannot).

-- A record's lexemes, each prefixed with the first 8 hex digits of its scope's md5 and a
-- space (which the parser never emits). The tag is short to keep the index small; two
-- scopes that share it only cost the scope filter that every read applies as well. The
-- scope lexeme is left out. A lexeme of over 2,037 bytes (the parser keeps words of up to
-- 2,046) is left out here and in scoped_tsquery: with the tag it would pass the 2,046 bytes
-- a tsquery operand may hold (and array_to_tsvector keeps a length past 2,047 modulo 2,048,
-- silently).
CREATE FUNCTION scoped_lexemes(scope text, tsv tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY(
               SELECT t.tag || l FROM unnest(tsvector_to_array(tsv)) AS l
                WHERE l NOT LIKE 'scope %' AND octet_length(l) <= 2037))
      FROM (SELECT left(md5(scope), 8) || ' ' AS tag) t
$$;

-- Any of the lexemes in any of the scopes, as scoped_lexemes spells them.
CREATE FUNCTION scoped_tsquery(lexemes text[], scopes text[]) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_agg(quote_literal(left(md5(s), 8) || ' ' || l), ' | ')::tsquery
      FROM unnest(scopes) AS s, unnest(lexemes) AS l
     WHERE octet_length(l) <= 2037
$$;

CREATE INDEX memory_records_scoped_tsv ON memory_records USING gin (scoped_lexemes(scope, search_tsv));

-- statistics of the new expression, so that the planner estimates matches against it
ANALYZE memory_records;
