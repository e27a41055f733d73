-- The predicates retrieval shares: scope, request and hop filters, visible relations (RFC 8.1, 2.5).

-- name: in_scopes
-- Fragment (/*@in_scopes(<scope>)*/): whether a scope (the argument) is one the caller may read; any, for a caller that reads every scope (all_scopes is written in, so one side folds away: RFC 8.1.5); parenthesised where it is ANDed.
%(all_scopes)s OR /*=*/ = ANY(%(scopes)s::text[])

-- name: scope_unindexed
-- Fragment (/*@scope_unindexed*/): in_scopes for the rows of a full-text match, its scope written (r.scope || ''), which no index matches, so the planner does not AND a bitmap of every record of the scopes from the btree on scope into the GIN scan (RFC 8.1.2).
(/*@in_scopes((r.scope || ''))*/)

-- name: scope_per_search
-- Fragment (/*@scope_per_search*/): the scope of one lateral HNSW search, e.scope and r.scope each equal to the unnested scope s.scope rather than in the scope list: a parameter per rescan, so the generic plan prunes each search to that scope's partition (RFC 8.1.1, 13.2). The record's scope is checked with IS NOT DISTINCT FROM, which no index serves and no equivalence class carries: each record is then reached by its id from the scope's vectors, never by reading every record of the scope (which the planner, estimating every scope small, preferred: 3,900 records read a scope where 200 had vectors).
(%(all_scopes)s OR (e.scope = s.scope AND r.scope IS NOT DISTINCT FROM s.scope))

-- name: visible_relations
-- Fragment (/*@visible_relations*/): the outgoing relations of r to records the read filter shows in full, made by as_of when the read has one, with the target's scope and sensitivity for the check in Python (RFC 2.5, 5.6); an ARRAY subquery, as record_fields' lists.
to_jsonb(ARRAY(SELECT jsonb_build_object('predicate', l.predicate, 'target_id', l.target_id,
                                         'weight', l.weight, 'target_scope', x.scope,
                                         'target_sensitivity', x.sensitivity)
                 FROM relations l JOIN memory_records x ON x.id = l.target_id
                WHERE l.source_id = r.id
                  AND (/*@in_scopes(x.scope)*/)
                  AND x.sensitivity_rank <= %(max_rank)s
                  AND (%(as_of)s::timestamptz IS NULL OR l.created_at <= %(as_of)s::timestamptz)
                ORDER BY l.created_at, l.predicate, l.target_id))

-- name: match_scoped
-- Fragment (/*@match_scoped*/): the tsvector of record r that a full-text match in the caller's scopes reads: for a few scopes (`scoped`, written in) its scoped lexemes (their GIN index, RFC 8.1.2), else its own lexemes (with the scope lexeme).
/*?scoped*/scoped_lexemes(r.scope, r.search_tsv)/*?end*//*?!scoped*/r.search_tsv/*?end*/

-- name: neighbour_filters
-- Fragment (/*@neighbour_filters*/): the predicates on record r that hold at every hop (RFC 8.4): sensitivity at most one level above the caller's maximum, transaction and valid time, status (proposed records only when asked for, RFC 5.7).
r.sensitivity_rank <= %(max_rank)s + 1
AND (%(as_of)s::timestamptz IS NULL OR r.recorded_at <= %(as_of)s::timestamptz)
AND (%(valid_at)s::timestamptz IS NULL
     OR ((r.valid_from IS NULL OR r.valid_from <= %(valid_at)s::timestamptz)
         AND (r.valid_to IS NULL OR %(valid_at)s::timestamptz < r.valid_to)))
AND (%(include_retracted)s
     OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) <> 'retracted')
AND (%(include_contested)s
     OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) <> 'contested')
AND (%(include_proposed)s
     OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) <> 'proposed')

-- name: counted_filters
-- Fragment (/*@counted_filters*/): whether record r counts in a full-text read's document frequencies: recorded by as_of and, unless the read asks for retracted records, not retracted (nor proposed, RFC 5.7) as of then, so a read as of a time (or of retracted records) ranks by the corpus it reads (RFC 8.1.2, 5.6).
(%(as_of)s::timestamptz IS NULL OR r.recorded_at <= %(as_of)s::timestamptz)
AND (%(include_retracted)s
     OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) <> 'retracted')
AND (%(include_proposed)s
     OR status_at(r.status, r.retracted_at, r.contested_at, %(as_of)s::timestamptz, r.proposed_until) <> 'proposed')

-- name: request_filters
-- Fragment (/*@request_filters*/): a request's predicates on record r: those of every hop (neighbour_filters), and the types, tags and salience floor that apply to roots (RFC 8.1).
/*@neighbour_filters*/
AND (%(types)s::text[] IS NULL OR r.type = ANY(%(types)s::text[]))
AND (%(tags)s::text[] IS NULL OR EXISTS (
         SELECT 1 FROM record_tags t WHERE t.record_id = r.id AND t.tag = ANY(%(tags)s::text[])))
AND (NOT %(salience_floor)s OR current_salience(r.base_salience, r.reinforced_at,
         r.half_life_seconds, r.min_salience, r.pinned, %(now)s) >= %(min_salience)s)
