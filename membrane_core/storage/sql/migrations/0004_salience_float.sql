-- current_salience() in double precision (RFC 6.1): extract() returns numeric, and numeric
-- power() cost about 5 us a row, 15x the float version, on every read and decay batch.

CREATE OR REPLACE FUNCTION current_salience(base double precision, reinforced timestamptz, half_life bigint,
                                 floor_ double precision, is_pinned boolean, at timestamptz)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- in double precision: extract() gives numeric, whose power() costs 15x more per row
    SELECT CASE WHEN is_pinned THEN base
                ELSE greatest(least(base, floor_),
                              base * power(2.0::float8,
                                           -greatest(0.0::float8,
                                                     extract(epoch FROM (at - reinforced))::float8)
                                           / half_life))
           END
$$;
