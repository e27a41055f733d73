-- RFC 8.2.3: a record's vector stays in its row and its token signs go out of line. A row
-- of a 384-dimension vector (1.5 KB) and the signs of 15 or more pieces passes Postgres's
-- 2 KB TOAST threshold, and the toaster moved the larger value, the vector, out of line:
-- every distance the vector arm computed then read the TOAST table. MAIN keeps the vector
-- in the row unless the row cannot fit otherwise; EXTERNAL moves the signs out, without the
-- compression that random bits defeat. Catalog only: rows written before keep their layout
-- until embedded again (membrane reembed finds them, RFC 12.5).
ALTER TABLE record_embeddings
    ALTER COLUMN embedding SET STORAGE MAIN,
    ALTER COLUMN token_signs SET STORAGE EXTERNAL;
