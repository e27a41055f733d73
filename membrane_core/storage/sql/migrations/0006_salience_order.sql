-- The salience arm without a query (RFC 8.1.4) reads records in the order of their current
-- salience through an index instead of computing it for every record of the scope (79 ms at
-- 1,000,000 records). For an unpinned record base * 2^(-(t - reinforced_at) / half_life)
-- equals 2^(decay_key - t / half_life), so among records of one half-life the order of
-- decay_key is the order of their decayed salience at every t. memory_records_salience
-- (scope, base_salience) was read by no statement and goes.

-- decay_key = log2(base) + reinforced_at / half_life, in seconds since the epoch (which no
-- time zone changes, so the function is immutable although extract() on timestamptz is not)
CREATE FUNCTION decay_key(base double precision, reinforced timestamptz, half_life bigint)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN base > 0
                THEN ln(base) / ln(2.0::float8) + extract(epoch FROM reinforced)::float8 / half_life
                ELSE '-Infinity'::float8 END
$$;

DROP INDEX memory_records_salience;
CREATE INDEX memory_records_decay ON memory_records
    (scope, half_life_seconds, decay_key(base_salience, reinforced_at, half_life_seconds) DESC)
    WHERE NOT pinned;
CREATE INDEX memory_records_floor ON memory_records
    (scope, least(base_salience, min_salience) DESC, created_at DESC, id)
    WHERE NOT pinned AND min_salience > 0;
CREATE INDEX memory_records_pinned ON memory_records (scope, base_salience DESC) WHERE pinned;

-- current_salience() failed with "value out of range: underflow" once a record was more than
-- about 1,075 half-lives old (an hour's half-life: six weeks), in retrieval and in the decay
-- batch alike. Past 900 half-lives, or for a base under 1e-50, the decayed part is now 0.
CREATE OR REPLACE FUNCTION current_salience(base double precision, reinforced timestamptz, half_life bigint,
                                 floor_ double precision, is_pinned boolean, at timestamptz)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN is_pinned THEN base
                ELSE greatest(least(base, floor_),
                              CASE WHEN base < 1e-50 OR extract(epoch FROM (at - reinforced))::float8
                                                        / half_life >= 900.0 THEN 0.0::float8
                                   ELSE base * power(2.0::float8,
                                                     -greatest(0.0::float8,
                                                               extract(epoch FROM (at - reinforced))::float8)
                                                     / half_life) END)
           END
$$;
