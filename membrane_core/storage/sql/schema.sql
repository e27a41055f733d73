-- Membrane schema (RFC 11.1). This file is the truth; migrations/ must produce it.
-- __EMBEDDING_DIM__ is replaced by the configured embedding dimension at migrate time.

CREATE EXTENSION IF NOT EXISTS vector;

-- The lexeme that tags a record's text with its scope (RFC 8.1.2): the full-text arm ANDs it
-- with the query's lexemes, so the GIN index returns only the caller's scopes instead of every
-- scope's matches for a heap recheck. The parser never emits a lexeme with a space in it.
CREATE FUNCTION scope_lexeme(scope text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY['scope ' || md5(scope)])
$$;

-- The scopes' lexemes OR-ed, to AND with a full-text query (RFC 8.1.2).
CREATE FUNCTION scopes_tsquery(scopes text[]) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_agg(quote_literal('scope ' || md5(s)), ' | ')::tsquery FROM unnest(scopes) AS s
$$;

-- A record's lexemes, each prefixed with a tag of its scope (the first 8 hex digits of its
-- md5 and a space), for the index the full-text arm reads when it is given scopes (RFC
-- 8.1.2): a query's posting lists then hold only the records of those scopes. Two scopes
-- sharing a tag only cost the scope filter every read applies too. Without the scope
-- lexeme. A lexeme of over 2,037 bytes (the parser keeps words of up to 2,046) is left out
-- here and in scoped_tsquery: with the tag it would pass the 2,046 bytes a tsquery operand
-- may hold (and array_to_tsvector keeps a length past 2,047 modulo 2,048, silently).
CREATE FUNCTION scoped_lexemes(scope text, tsv tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_to_tsvector(ARRAY(
               SELECT t.tag || l FROM unnest(tsvector_to_array(tsv)) AS l
                WHERE l NOT LIKE 'scope %' AND octet_length(l) <= 2037))
      FROM (SELECT left(md5(scope), 8) || ' ' AS tag) t
$$;

-- Any of the lexemes in any of the scopes, as scoped_lexemes spells them (RFC 8.1.2).
CREATE FUNCTION scoped_tsquery(lexemes text[], scopes text[]) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT string_agg(quote_literal(left(md5(s), 8) || ' ' || l), ' | ')::tsquery
      FROM unnest(scopes) AS s, unnest(lexemes) AS l
     WHERE octet_length(l) <= 2037
$$;

CREATE TABLE memory_records (
    id                 uuid PRIMARY KEY,
    type               text NOT NULL CHECK (type IN ('episodic','working','semantic','competence','plan_graph','entity')),
    scope              text NOT NULL CHECK (length(btrim(scope)) > 0),
    sensitivity        text NOT NULL CHECK (sensitivity IN ('public','low','medium','high','hyper')),
    sensitivity_rank   smallint GENERATED ALWAYS AS (
        CASE sensitivity WHEN 'public' THEN 0 WHEN 'low' THEN 1 WHEN 'medium' THEN 2
                         WHEN 'high' THEN 3 ELSE 4 END) STORED,
    confidence         double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    salience           double precision NOT NULL CHECK (salience >= 0),
    status             text NOT NULL DEFAULT 'active' CHECK (status IN ('active','contested','retracted','proposed')),
    -- lifecycle (RFC 6.1): salience(t) = base_salience * 2^(-(t - reinforced_at)/half_life)
    decay_curve        text NOT NULL DEFAULT 'exponential' CHECK (decay_curve IN ('exponential')),
    half_life_seconds  bigint NOT NULL CHECK (half_life_seconds >= 1),
    min_salience       double precision NOT NULL DEFAULT 0 CHECK (min_salience >= 0 AND min_salience <= 1),
    max_age_seconds    bigint CHECK (max_age_seconds IS NULL OR max_age_seconds >= 1),
    reinforcement_gain double precision NOT NULL DEFAULT 0.1 CHECK (reinforcement_gain >= 0 AND reinforcement_gain <= 1),
    base_salience      double precision NOT NULL CHECK (base_salience >= 0),
    reinforced_at      timestamptz NOT NULL,
    pinned             boolean NOT NULL DEFAULT false,
    deletion_policy    text NOT NULL DEFAULT 'auto_prune' CHECK (deletion_policy IN ('auto_prune','manual_only','never')),
    -- valid time (RFC 5.6)
    validity_mode      text CHECK (validity_mode IS NULL OR validity_mode IN ('global','conditional','timeboxed')),
    valid_from         timestamptz,
    valid_to           timestamptz,
    -- transaction time (RFC 5.6)
    recorded_at        timestamptz NOT NULL DEFAULT now(),
    retracted_at       timestamptz,
    contested_at       timestamptz,
    -- RFC 5.7: when the record's proposal was decided; before it the record reads proposed
    proposed_until     timestamptz,
    occurred_at        timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    summary            text,
    metadata           jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- semantic fact key, normalised (RFC 5.4)
    fact_subject       text,
    fact_predicate     text,
    fact_object        text,
    -- projected size of the hydrated record, for the byte budget (RFC 8.3)
    projected_bytes    integer NOT NULL CHECK (projected_bytes >= 0),
    search_text        text NOT NULL DEFAULT '',
    -- the text's lexemes and the scope's (RFC 8.1.2)
    search_tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english', search_text) || scope_lexeme(scope)) STORED,
    CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_to > valid_from),
    CHECK ((type = 'semantic') = (fact_subject IS NOT NULL))
);
CREATE INDEX memory_records_scope_type ON memory_records (scope, type, status, sensitivity_rank);
CREATE INDEX memory_records_tsv ON memory_records USING gin (search_tsv);
CREATE INDEX memory_records_scoped_tsv ON memory_records USING gin (scoped_lexemes(scope, search_tsv));
-- RFC 10.7: one scope's records newest first, in keyset pages
CREATE INDEX memory_records_listing ON memory_records (scope, created_at, id);
CREATE INDEX memory_records_fact ON memory_records (scope, fact_subject, fact_predicate, fact_object)
    WHERE type = 'semantic';

-- Closed-form current salience (RFC 6.1); never compounds. In double precision (extract()
-- gives numeric, whose power() costs 15x more a row); past 900 half-lives (or for a base
-- under 1e-50) the decayed part is 0, where power() would fail with an underflow.
CREATE FUNCTION current_salience(base double precision, reinforced timestamptz, half_life bigint,
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

-- Order of decayed salience within one half-life (RFC 8.1.4): base * 2^(-(t - reinforced) /
-- half_life) = 2^(decay_key - t / half_life). Epoch seconds are zone-free, hence immutable.
CREATE FUNCTION decay_key(base double precision, reinforced timestamptz, half_life bigint)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN base > 0
                THEN ln(base) / ln(2.0::float8) + extract(epoch FROM reinforced)::float8 / half_life
                ELSE '-Infinity'::float8 END
$$;

-- The salience arm's three bounds (RFC 8.1.4): decayed salience per half-life, the floor,
-- pinned records.
CREATE INDEX memory_records_decay ON memory_records
    (scope, half_life_seconds, decay_key(base_salience, reinforced_at, half_life_seconds) DESC)
    WHERE NOT pinned;
CREATE INDEX memory_records_floor ON memory_records
    (scope, least(base_salience, min_salience) DESC, created_at DESC, id)
    WHERE NOT pinned AND min_salience > 0;
CREATE INDEX memory_records_pinned ON memory_records (scope, base_salience DESC) WHERE pinned;
CREATE INDEX memory_records_episode_time ON memory_records (scope, occurred_at, id)
    WHERE type = 'episodic';

-- Revision status as of transaction time ``at`` (RFC 5.6); NULL ``at`` means the current status.
-- A record reads proposed before its proposal was decided (``proposed_until``, RFC 5.7).
CREATE FUNCTION status_at(status text, retracted timestamptz, contested timestamptz, at timestamptz,
                          proposed_until timestamptz)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN at IS NULL THEN status
                WHEN retracted <= at OR (status = 'retracted' AND retracted IS NULL) THEN 'retracted'
                WHEN status = 'proposed' OR proposed_until > at THEN 'proposed'
                WHEN contested <= at OR (status = 'contested' AND contested IS NULL) THEN 'contested'
                ELSE 'active'
           END
$$;

-- The decay batch's checkpoint of a record's salience (RFC 6.1), in a narrow row of its own:
-- refreshing it rewrites neither the record's row (about 1.2 KB) nor any of its ten indexes.
-- It holds while the record keeps the base salience and clock it was computed from; a write
-- that changes either sets memory_records.salience, which is read instead (stored_salience).
CREATE TABLE salience_checkpoints (
    record_id     uuid PRIMARY KEY REFERENCES memory_records (id) ON DELETE CASCADE,
    salience      double precision NOT NULL,
    base_salience double precision NOT NULL,
    reinforced_at timestamptz NOT NULL
) WITH (fillfactor = 70);

-- A sealed record (RFC 7.6) keeps its payload, summary, metadata and tags in ``sealed``, an
-- AES-GCM ciphertext naming ``key_id``; its body is NULL. A plain one has a body and no key.
CREATE TABLE record_payloads (
    record_id uuid PRIMARY KEY REFERENCES memory_records (id) ON DELETE CASCADE,
    kind      text NOT NULL CHECK (kind IN ('episodic','working','semantic','competence','plan_graph','entity')),
    body      jsonb,
    key_id    text,
    sealed    bytea,
    CHECK ((body IS NULL) = (sealed IS NOT NULL) AND (key_id IS NULL) = (sealed IS NULL))
);
-- RFC 7.6: the records sealed under each key, for rotation's progress
CREATE INDEX record_payloads_key ON record_payloads (key_id) WHERE key_id IS NOT NULL;

CREATE TABLE record_tags (
    record_id uuid NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
    tag       text NOT NULL CHECK (length(tag) > 0),
    PRIMARY KEY (record_id, tag)
);
CREATE INDEX record_tags_tag ON record_tags (tag);

CREATE TABLE provenance_sources (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    record_id  uuid NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('event','artifact','tool_call','observation','outcome')),
    ref        text NOT NULL,
    hash       text,
    created_by text,
    ts         timestamptz,
    added_at   timestamptz  -- RFC 5.6: when the source was added (NULL: before migration 0009)
);
CREATE INDEX provenance_sources_record ON provenance_sources (record_id);
CREATE INDEX provenance_sources_ref ON provenance_sources (ref);

CREATE TABLE relations (
    source_id  uuid NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
    predicate  text NOT NULL CHECK (length(predicate) > 0),
    target_id  uuid NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
    weight     double precision CHECK (weight IS NULL OR (weight >= 0 AND weight <= 1)),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, predicate, target_id)
);
CREATE INDEX relations_target ON relations (target_id);

CREATE TABLE entity_terms (
    record_id uuid NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
    scope     text NOT NULL,
    term      text NOT NULL CHECK (length(term) > 0),
    term_kind text NOT NULL DEFAULT 'alias' CHECK (term_kind IN ('canonical','alias')),
    PRIMARY KEY (record_id, term)
);
CREATE INDEX entity_terms_lookup ON entity_terms (scope, term);

CREATE TABLE entity_identifiers (
    record_id uuid NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
    scope     text NOT NULL,
    namespace text NOT NULL CHECK (length(namespace) > 0),
    value     text NOT NULL CHECK (length(value) > 0),
    PRIMARY KEY (scope, namespace, value)
);
CREATE INDEX entity_identifiers_record ON entity_identifiers (record_id);

-- Partitioned by scope (RFC 13.2): a one-scope vector search walks one partition's HNSW graph,
-- not the graph of every scope. scope copies memory_records.scope, which never changes.
CREATE TABLE record_embeddings (
    record_id  uuid NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
    scope      text NOT NULL,
    model      text NOT NULL,
    embedding  vector(__EMBEDDING_DIM__) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- RFC 8.2.3: the sign bits of the text's token vectors, ceil(dim / 8) bytes a token;
    -- NULL from a provider that gives no tokens, and for a sealed record (RFC 7.6)
    token_signs bytea,
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
-- RFC 8.2.3: the vector stays in the row, the token signs go out of line past 2 KB
ALTER TABLE record_embeddings
    ALTER COLUMN embedding SET STORAGE MAIN,
    ALTER COLUMN token_signs SET STORAGE EXTERNAL;
CREATE INDEX record_embeddings_hnsw ON record_embeddings USING hnsw (embedding vector_cosine_ops);
CREATE INDEX record_embeddings_record ON record_embeddings (record_id);

-- Erasures (RFC 15.4), recorded without content: who, when, why, the kind of target and
-- its digest, and the rows erased by table.
CREATE TABLE erasures (
    id            uuid PRIMARY KEY,
    actor         text NOT NULL,
    reason        text NOT NULL,
    target_kind   text NOT NULL CHECK (target_kind IN ('scope','entity','records')),
    target_digest bytea NOT NULL,
    counts        jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- Append-only, hash-chained per record, no foreign key to the record: survives deletion
-- (RFC 5.5). The chain covers a digest of each entry's rationale and details, which only an
-- erasure may blank (RFC 15.4).
CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    record_id   uuid NOT NULL,
    scope       text NOT NULL,
    sensitivity text NOT NULL CHECK (sensitivity IN ('public','low','medium','high','hyper')),
    action      text NOT NULL CHECK (action IN ('create','revise','fork','merge','delete','reinforce','decay','requeue','review',
                      'erase','import')),
    actor       text NOT NULL,
    ts          timestamptz NOT NULL DEFAULT clock_timestamp(),
    rationale   text NOT NULL,
    details     jsonb NOT NULL DEFAULT '{}'::jsonb,
    prev_hash   bytea,
    hash        bytea NOT NULL,
    content_digest bytea NOT NULL,
    erased_by   uuid REFERENCES erasures (id)
);
CREATE INDEX audit_log_record ON audit_log (record_id, id);

CREATE FUNCTION audit_content_digest(why text, det jsonb) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT sha256(convert_to(why || chr(31) || det::text, 'UTF8'))
$$;

CREATE FUNCTION audit_entry_hash(prev bytea, rec uuid, act text, who text, at timestamptz,
                                 digest bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT sha256(coalesce(prev, ''::bytea) || convert_to(
        rec::text || chr(31) || act || chr(31) || who || chr(31) ||
        to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || chr(31) ||
        encode(digest, 'hex'), 'UTF8'))
$$;

CREATE FUNCTION audit_log_chain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT a.hash INTO NEW.prev_hash FROM audit_log a
     WHERE a.record_id = NEW.record_id ORDER BY a.id DESC LIMIT 1;
    -- an erased entry comes only from an import (RFC 15.2), blank, with the digest it
    -- was chained with and the erasure that blanked it; any other entry's digest is its own
    IF NEW.erased_by IS NULL OR NEW.content_digest IS NULL OR NEW.rationale <> ''
       OR NEW.details <> '{}'::jsonb THEN
        NEW.content_digest := audit_content_digest(NEW.rationale, NEW.details);
        NEW.erased_by := NULL;
    END IF;
    NEW.hash := audit_entry_hash(NEW.prev_hash, NEW.record_id, NEW.action, NEW.actor, NEW.ts,
                                 NEW.content_digest);
    RETURN NEW;
END $$;
CREATE TRIGGER audit_log_chain BEFORE INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_chain();

-- The one change an entry admits: an erasure blanks its rationale and details, once, and
-- names itself (RFC 15.4); everything the chain covers stays as it was.
CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.erased_by IS NULL AND NEW.erased_by IS NOT NULL
       AND NEW.rationale = '' AND NEW.details = '{}'::jsonb
       AND (NEW.id, NEW.record_id, NEW.scope, NEW.sensitivity, NEW.action, NEW.actor, NEW.ts,
            NEW.content_digest, NEW.prev_hash, NEW.hash)
           IS NOT DISTINCT FROM
           (OLD.id, OLD.record_id, OLD.scope, OLD.sensitivity, OLD.action, OLD.actor, OLD.ts,
            OLD.content_digest, OLD.prev_hash, OLD.hash) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change();

-- The durable inbox (RFC 9.1).
CREATE TABLE operations (
    id              uuid PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('capture','supersede','fork','merge','retract','contest','reinforce','penalize','maintenance')),
    status          text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued','running','succeeded','failed')),
    principal       text NOT NULL,
    idempotency_key text,
    request_hash    text NOT NULL,
    request         jsonb NOT NULL,
    trust           jsonb NOT NULL,
    target_id       uuid,
    record_id       uuid,
    record_ids      uuid[] NOT NULL DEFAULT '{}',
    result          jsonb,
    error           jsonb,
    attempts        integer NOT NULL DEFAULT 0,
    claimed_by      text,
    claim_expires_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    dispatched_at   timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    -- the request that submitted it: the request id of its log lines (RFC 9.1, 14.3)
    request_id      text CHECK (length(request_id) <= 128),
    UNIQUE (principal, idempotency_key)
);
-- (kind, created_at, id): the claim's ORDER BY, so a claim reads LIMIT rows in index order
-- instead of sorting every queued operation (RFC 9.4)
CREATE INDEX operations_pending ON operations (kind, created_at, id) WHERE status IN ('queued','running');
CREATE INDEX operations_running ON operations (claim_expires_at) WHERE status = 'running';
CREATE INDEX operations_finished ON operations (finished_at) WHERE status IN ('succeeded','failed');

-- Background work, written with the change that causes it (RFC 9.3).
CREATE TABLE work_items (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind             text NOT NULL CHECK (kind IN ('embed','extract','consolidate','compress','decay','prune','seal')),
    target_id        uuid NOT NULL,
    due_at           timestamptz NOT NULL DEFAULT now(),
    claimed_by       text,
    claim_expires_at timestamptz,
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    dead             boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, target_id)
);
CREATE INDEX work_items_due ON work_items (kind, due_at, id) WHERE NOT dead;
-- RFC 10.7: buried items in keyset pages
CREATE INDEX work_items_buried ON work_items (id) WHERE dead;
-- Queue tables churn: analyse and vacuum after 2 % of their rows change, not 10-20 %, so
-- that a store filling from empty is not planned with the statistics of an empty table.
ALTER TABLE operations SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE work_items SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Retracted facts that capture and consolidation must not re-create (RFC 5.4).
CREATE TABLE fact_tombstones (
    scope      text NOT NULL,
    subject    text NOT NULL,
    predicate  text NOT NULL,
    object     text NOT NULL,
    record_id  uuid,
    actor      text NOT NULL,
    rationale  text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- RFC 3.4, 5.4: the level the tombstone binds, the retracted record's sensitivity rank;
    -- -1 binds every level (a tombstone from before migration 0008 whose record was gone)
    sensitivity_rank smallint NOT NULL,
    PRIMARY KEY (scope, subject, predicate, object, sensitivity_rank)
);

-- RFC 15.4: the fact keys of erased records, as digests (fact_key_digest), refused by the
-- guard and by every writer's fact match at every level.
CREATE FUNCTION fact_key_digest(subject text, predicate text, object text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT sha256(convert_to(subject || chr(31) || predicate || chr(31) || object, 'UTF8'))
$$;

CREATE TABLE erased_facts (
    scope      text NOT NULL,
    key_digest bytea NOT NULL,
    erasure_id uuid NOT NULL REFERENCES erasures (id),
    PRIMARY KEY (scope, key_digest)
);

-- Tool-call signatures seen in episodes, per scope: competence and plan-graph mining (RFC 6.4.3).
CREATE TABLE tool_signatures (
    scope            text NOT NULL,
    signature_key    text NOT NULL,
    signature        text[] NOT NULL,
    success_count    integer NOT NULL DEFAULT 0 CHECK (success_count >= 0),
    failure_count    integer NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
    sensitivity_rank smallint NOT NULL DEFAULT 0,
    pending_sources  uuid[] NOT NULL DEFAULT '{}',
    competence_id    uuid,
    plan_id          uuid,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, signature_key)
);

-- RFC 5.4: the database itself refuses to create a fact under a committed tombstone
-- and to revive a retracted record, whichever writer tries (a backstop behind the
-- advisory key locks that serialise concurrent writers).
CREATE FUNCTION memory_records_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.status = 'retracted' AND NEW.status <> 'retracted' THEN
            RAISE EXCEPTION 'record % is retracted; retraction is final (re-assert it with a revision)',
                OLD.id USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.type = 'semantic' AND NEW.status <> 'retracted' THEN
        -- a tombstone binds its own level (RFC 3.4, 5.4), or every level (-1); generated
        -- columns are not computed yet in a BEFORE trigger, hence the rank from NEW.sensitivity
        IF EXISTS (SELECT 1 FROM fact_tombstones t
                    WHERE t.scope = NEW.scope AND t.subject = NEW.fact_subject
                      AND t.predicate = NEW.fact_predicate AND t.object = NEW.fact_object
                      AND t.sensitivity_rank IN (-1, array_position(
                              ARRAY['public','low','medium','high','hyper'], NEW.sensitivity) - 1)) THEN
            RAISE EXCEPTION 'fact (%, %, %) is tombstoned in scope %', NEW.fact_subject,
                NEW.fact_predicate, NEW.fact_object, NEW.scope USING ERRCODE = 'check_violation';
        END IF;
        -- RFC 15.4: an erased fact binds every level, and is named by nothing but its scope
        IF EXISTS (SELECT 1 FROM erased_facts e
                    WHERE e.scope = NEW.scope
                      AND e.key_digest = fact_key_digest(NEW.fact_subject, NEW.fact_predicate, NEW.fact_object)) THEN
            RAISE EXCEPTION 'a fact of scope % was erased and may not be written again', NEW.scope
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END $$;
-- It runs only for the rows it can refuse: a new semantic record that is not retracted, and
-- an update that takes a record out of retraction; every other row skips the PL/pgSQL call.
CREATE TRIGGER memory_records_guard BEFORE INSERT ON memory_records
    FOR EACH ROW WHEN (NEW.type = 'semantic' AND NEW.status <> 'retracted')
    EXECUTE FUNCTION memory_records_guard();
CREATE TRIGGER memory_records_unretract_guard BEFORE UPDATE OF status ON memory_records
    FOR EACH ROW WHEN (OLD.status = 'retracted' AND NEW.status <> 'retracted')
    EXECUTE FUNCTION memory_records_guard();

-- RFC 5.7: a proposal groups the records one unreviewed write proposed, until a reviewer
-- decides it or it expires.
CREATE TABLE proposals (
    id              uuid PRIMARY KEY,
    scope           text NOT NULL,
    sensitivity     text NOT NULL CHECK (sensitivity IN ('public','low','medium','high','hyper')),
    sensitivity_rank smallint GENERATED ALWAYS AS (
        CASE sensitivity WHEN 'public' THEN 0 WHEN 'low' THEN 1 WHEN 'medium' THEN 2
                         WHEN 'high' THEN 3 ELSE 4 END) STORED,
    source          text NOT NULL CHECK (source IN ('capture','extraction')),
    proposed_by     text NOT NULL,
    actors          text[] NOT NULL,
    corroborations  integer NOT NULL DEFAULT 0 CHECK (corroborations >= 0),
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending','approved','rejected','amended','expired')),
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    decided_by      text,
    decided_at      timestamptz,
    rationale       text
);
CREATE INDEX proposals_pending ON proposals (scope, created_at, id) WHERE status = 'pending';
CREATE INDEX proposals_expiry ON proposals (expires_at) WHERE status = 'pending';
CREATE INDEX proposals_decided ON proposals (status) WHERE status <> 'pending';

CREATE TABLE proposal_records (
    record_id   uuid PRIMARY KEY REFERENCES memory_records (id) ON DELETE CASCADE,
    proposal_id uuid NOT NULL REFERENCES proposals (id) ON DELETE CASCADE
);
CREATE INDEX proposal_records_proposal ON proposal_records (proposal_id);

CREATE TABLE schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
