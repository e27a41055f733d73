"""Retrieval: hybrid, trust-, status- and budget-bounded, with graph expansion (RFC 8)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from membrane_core import decay, errors
from membrane_core.capture import mentions
from membrane_core.enums import RevisionStatus, Sensitivity
from membrane_core.models import MemoryRecord
from membrane_core.providers import EmbeddingProvider, ProviderError, build_embedding_provider
from membrane_core.providers.base import Reranker, token_embedder, unit
from membrane_core.requests import ExpandOptions, RetrieveRequest
from membrane_core.results import (
    ArmCounts,
    DateWindow,
    Edge,
    RecordView,
    RetrieveDiagnostics,
    RetrieveResult,
    Selection,
    shown_references,
    view,
)
from membrane_core.retrieval import fusion, graph, late, selector, when
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.settings import Settings
from membrane_core.storage import records, retrieval, rowbatch
from membrane_core.storage.db import Connection, Database, ServedBy
from membrane_core.storage.replica import parse_lsn
from membrane_core.trust import TrustPolicy, Visibility

log = logging.getLogger(__name__)

#: Longest entity name looked up, in words (RFC 8.1).
MAX_TERM_WORDS = 4
#: Most query terms sent to the entity lookup (RFC 8.1).
MAX_TERMS = 64
#: An entity linked to more records than this is too common to discriminate (RFC 8.1).
ENTITY_MAX_LINKS = 25
#: RFC 8.1.1: query vectors kept per process, most recently used first out last.
RECENT_QUERY_VECTORS = 1024
_TOKEN_EDGE = "\"'`.,;:!?()[]{}<>\u201c\u201d\u2018\u2019"


def current_salience(record: MemoryRecord, at: datetime) -> float:
    """RFC 6.1: the record's salience now, from its base and decay clock."""
    lc = record.lifecycle
    return decay.salience_at(lc.base_salience, lc.reinforced_at, lc.decay, at, pinned=lc.pinned)


def status_as_of(status: str, retracted_at: datetime | None, sql_status: str, as_of: datetime | None) -> str:
    """RFC 5.6: a record's status at ``as_of`` (now when ``None``), re-derived in Python from
    its stored ``status`` and ``retracted_at``.

    The contest time is not on the record, so a contest is taken from SQL, and the stricter
    of the two answers wins.
    """
    if as_of is None:
        derived = status
    elif retracted_at is not None and retracted_at <= as_of:
        derived = RevisionStatus.RETRACTED.value
    else:
        derived = sql_status
    if RevisionStatus.RETRACTED.value in (derived, sql_status):
        return RevisionStatus.RETRACTED.value
    if RevisionStatus.PROPOSED.value in (derived, sql_status):  # RFC 5.7: until decided
        return RevisionStatus.PROPOSED.value
    return derived


def in_time(
    recorded_at: datetime, valid_from: datetime | None, valid_to: datetime | None, req: RetrieveRequest
) -> bool:
    """RFC 5.6: recorded by ``as_of`` and valid at ``valid_at`` (open ends are unbounded)."""
    if req.as_of is not None and recorded_at > req.as_of:
        return False
    if req.valid_at is not None:
        if valid_from is not None and valid_from > req.valid_at:
            return False
        if valid_to is not None and req.valid_at >= valid_to:
            return False
    return True


def query_terms(query: str | None) -> list[str]:
    """RFC 8.1: normalised word n-grams of the query (up to 4 words) for the entity lookup."""
    if not query:
        return []
    words = []
    for raw in query.split():
        w = raw.strip(_TOKEN_EDGE)
        for suffix in ("'s", "\u2019s"):
            if w.lower().endswith(suffix):
                w = w[: -len(suffix)]
        if w:
            words.append(w)
    terms: dict[str, None] = {}
    for n in range(MAX_TERM_WORDS, 0, -1):
        for i in range(len(words) - n + 1):
            term = mentions.normalise_term(" ".join(words[i : i + n]))
            if len(term) >= 2:
                terms[term] = None
    return list(terms)[:MAX_TERMS]


def query_identifiers(query: str | None) -> list[tuple[str, str]]:
    """RFC 8.1: namespaced identifiers (``github:octocat``, ``@octocat``) named in the query."""
    found: dict[tuple[str, str], None] = {}
    for raw in (query or "").split():
        ident = mentions.parse_identifier(raw.strip(_TOKEN_EDGE.replace("@", "")))
        if ident is not None:
            found[ident] = None
    return list(found)[:MAX_TERMS]


_WORD = re.compile(r"\w")


def _text(rec: retrieval.Stored) -> str | None:
    """RFC 8.2.4: what a reranker reads of a hydrated record: its indexed text (RFC 8.1);
    ``None`` for a sealed record, which is not opened before its trust check (RFC 7.6)."""
    row = rec.row
    if row.get("sealed") is not None:
        return None
    payload = rowbatch.PAYLOAD.validate_python(row["payload"])
    return rowbatch.search_text_of(payload, row.get("summary"), list(row.get("tags") or []))


#: Candidate windows (RFC 8.1.5): a window is written into the statement's text, so it
#: takes one of these values (the next one up) and the shapes stay few.
WINDOWS = (10, 25, 50, 100, 200, 400)


def window(n: int) -> int:
    """The smallest window of :data:`WINDOWS` holding ``n`` rows (at most the largest)."""
    return next((w for w in WINDOWS if w >= n), WINDOWS[-1])


def arm_window(limit: int) -> int:
    """RFC 8.1.2, 8.1.3: candidates kept per lexical and entity arm for a row cap of ``limit``."""
    return window(max(25, 2 * limit))


def read_filter(
    req: RetrieveRequest, policy: TrustPolicy, now: datetime, sealer: Sealer = NO_KEYS
) -> retrieval.ReadFilter:
    """RFC 8.1, 7.3, 5.6: the SQL predicates of a request under the caller's narrowed policy;
    a tag also matches a sealed record's blind value of it (RFC 7.6)."""
    return retrieval.ReadFilter(
        scopes=None if policy.reads_all else sorted(policy.read_scopes),
        max_rank=policy.max_sensitivity.rank,
        types=[t.value for t in req.memory_types] if req.memory_types else None,
        tags=sealer.tag_forms(list(req.tags)) if req.tags else None,
        include_retracted=req.include_retracted,
        include_contested=req.include_contested,
        include_proposed=req.include_proposed,
        min_salience=req.min_salience,
        now=now,
        as_of=req.as_of,
        valid_at=req.valid_at,
    )


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one request asks of the roots statement and of the re-rankings (RFC 8.1-8.2.4)."""

    req: RetrieveRequest
    policy: TrustPolicy  # narrowed to the request's scopes and sensitivity
    now: datetime
    roots: retrieval.RootsQuery
    expand: ExpandOptions | None  # None without hops (RFC 8.4)
    vector_state: str  # RFC 8.1.1, 8.6
    qtokens: Any  # RFC 8.2.3: the query's token matrix; None without late interaction
    cross: Reranker | None  # RFC 8.2.4
    cross_state: str


@dataclasses.dataclass(frozen=True)
class Reranked:
    """The pool in its final order, cut to the limit, and what re-ranked it (RFC 8.2.3, 8.2.4);
    ``released``: the statement's transaction has ended (the cross-encoder ran after it)."""

    ranked: list[retrieval.Ranked]
    late_state: str
    cross_state: str
    released: bool


@dataclasses.dataclass(frozen=True)
class Checked:
    """The roots that passed the re-check in Python, within the byte budget (RFC 7.3, 8.3):
    each view with its record (``None`` when redacted), the bytes they use, how many the
    re-check dropped, and whether the budget cut them."""

    roots: list[tuple[RecordView, retrieval.Stored | None]]
    used: int
    dropped: int
    cut: bool


@dataclasses.dataclass(frozen=True)
class Expanded:
    """The graph expansion, the neighbours returned, the edges between the records returned,
    and the bytes of roots and neighbours (RFC 8.4, 8.3)."""

    expansion: graph.Expansion
    neighbors: list[RecordView]
    edges: list[Edge]
    used: int


class Retriever:
    """RFC 8: candidates in SQL, fused, then trust, status and budgets re-applied in Python.

    ``embedder`` embeds the query for the vector arm: a provider, or a factory called once on
    first use (to share the pipeline's provider); without one it is built lazily from
    ``settings`` (``None`` when no provider is configured, and the vector arm is skipped).
    ``sealer`` opens sealed records, each only after its trust check (RFC 7.6).
    """

    def __init__(
        self,
        db: Database,
        *,
        clock: Any,
        embedder: EmbeddingProvider | Callable[[], EmbeddingProvider | None] | None = None,
        settings: Settings | None = None,
        fusion_method: str = fusion.DEFAULT_METHOD,
        weights: Mapping[str, float] | None = None,
        selector_threshold: float = selector.DEFAULT_THRESHOLD,
        entity_max_links: int = ENTITY_MAX_LINKS,
        vector_k: int = 10,
        adjacent: bool = True,
        late_interaction: bool = True,
        reranker: Reranker | Callable[[], Reranker | None] | None = None,
        rerank_pool: int = 20,
        rerank_weight: float = 3.0,
        sealer: Sealer = NO_KEYS,
    ) -> None:
        if fusion_method not in fusion.METHODS:
            raise ValueError(f"unknown fusion {fusion_method!r}")
        self.db = db
        self.clock = clock
        self.settings = settings
        self.fusion_method = fusion_method
        self.weights = dict(weights or fusion.DEFAULT_WEIGHTS)
        self.selector_threshold = selector_threshold
        self.entity_max_links = entity_max_links
        self.vector_k = vector_k
        #: RFC 8.2.1: whether the best episodes lift the episodes adjacent to them in time
        self.adjacent = adjacent
        #: RFC 8.2.3: whether the pool is re-ranked by its tokens (with a provider that gives them)
        self.late_interaction = late_interaction
        #: RFC 8.2.4: the fused pool's best rows a cross-encoder re-ranks, and its weight
        self.rerank_pool = rerank_pool
        self.rerank_weight = rerank_weight
        self._reranker: Reranker | None = None
        self._reranker_factory: Callable[[], Reranker | None] | None = None
        self._reranker_error: str | None = None
        self._reranker_lock = threading.Lock()
        if isinstance(reranker, Reranker):
            self._reranker = reranker
        elif reranker is not None:
            self._reranker_factory = reranker
        #: RFC 7.6: opens sealed records once their trust check passed
        self.sealer = sealer
        # RFC 8.1.1: recent query vectors, so that a question asked again costs no model call
        self._recent: OrderedDict[str, tuple[list[float], Any]] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._factory: Callable[[], EmbeddingProvider | None] | None = None
        self._embedder: EmbeddingProvider | None = None
        if isinstance(embedder, EmbeddingProvider):
            self._embedder = embedder
        elif embedder is not None:
            self._factory = embedder
        self._embedder_built = self._embedder is not None

    @property
    def embedder(self) -> EmbeddingProvider | None:
        """The query embedder, built from settings on first use (RFC 12.1)."""
        if not self._embedder_built:
            s = self.settings
            if self._factory is not None:
                self._embedder = self._factory()
            elif s is not None:
                self._embedder = build_embedding_provider(
                    s.embedding_provider,
                    dim=s.embedding_dim,
                    base_url=s.embedding_base_url,
                    model=s.embedding_model,
                    api_key=s.embedding_api_key.get_secret_value() if s.embedding_api_key else None,
                    cache_dir=s.data_dir / "models",
                )
            self._embedder_built = True
        return self._embedder

    def reranker(self) -> tuple[Reranker | None, str]:
        """RFC 8.2.4: the cross-encoder, built on first use, and its state: ``off`` without
        one, ``provider_error`` when it could not be loaded (said once in the log)."""
        if self._reranker_factory is not None:
            with self._reranker_lock:  # one load; requests arriving meanwhile wait for it
                factory = self._reranker_factory
                if factory is not None:
                    try:
                        self._reranker = factory()
                    except Exception as exc:  # a model that cannot load never fails a retrieve
                        self._reranker_error = str(exc)
                        log.warning(
                            "the reranker cannot be loaded; results keep the fused order",
                            extra={"error": str(exc)},
                        )
                    finally:
                        self._reranker_factory = None
        if self._reranker is not None:
            return self._reranker, "used"
        return None, "provider_error" if self._reranker_error else "off"

    def _embed(self, query: str | None) -> tuple[list[float] | None, str, Any]:
        """The query's vector, the vector arm's state (RFC 8.6) and, with late interaction
        and a provider that gives tokens, the query's token matrix (RFC 8.2.3), else None."""
        if not query or not _WORD.search(query):
            return None, "no_query", None
        try:
            provider = self.embedder
        except (ValueError, ProviderError) as exc:
            log.warning("no query embedder; vector arm skipped", extra={"error": str(exc)})
            return None, "provider_error", None
        if provider is None:
            return None, "no_provider", None
        with self._recent_lock:
            known = self._recent.get(query)
            if known is not None:
                self._recent.move_to_end(query)
                return known[0], "used", known[1] if self.late_interaction else None
        tokens = token_embedder(provider) if self.late_interaction else None
        qtokens = None
        try:
            if tokens is None:
                vec = provider.embed([query])[0]
            else:  # RFC 8.2.3: the query's tokens come from the same run of the model
                vecs, toks = tokens.embed_tokens([query])
                vec = vecs[0]
                qtokens = late.query_matrix(toks[0]) if toks else None
        except ProviderError as exc:
            log.warning("query embedding failed; vector arm skipped", extra={"error": str(exc)})
            return None, "provider_error", None
        if len(vec) != self.db.embedding_dim:
            return None, "dimension_mismatch", None
        qvec = unit(vec)  # RFC 8.1.1: a zero or non-finite vector ranks nothing
        if qvec is None:
            return None, "degenerate_vector", None
        if qtokens is not None and len(qtokens) == 0:
            qtokens = None
        with self._recent_lock:
            self._recent[query] = (qvec, qtokens)
            if len(self._recent) > RECENT_QUERY_VECTORS:
                self._recent.popitem(last=False)
        return qvec, "used", qtokens

    def warm(self) -> None:
        """Build the query embedder and run it once, so the first request pays neither (RFC 8.1.1);
        load the reranker, if one is configured (RFC 8.2.4)."""
        with contextlib.suppress(ValueError, ProviderError):
            provider = self.embedder
            if provider is not None:
                provider.embed(["warm up"])
        self.reranker()

    def retrieve(self, req: RetrieveRequest, trust: TrustPolicy) -> RetrieveResult:
        """RFC 8.1-8.6: hybrid candidates filtered in SQL, fused, bounded, re-checked, expanded."""
        plan = self._plan(req, trust)
        token = parse_lsn(req.min_lsn) if req.min_lsn else None
        with contextlib.ExitStack() as held:
            conn, served_by = held.enter_context(self.db.read(token))
            found = self._run(conn, plan)
            reranked = self._rerank(plan, found, held)
            checked = self._check(plan, reranked.ranked)
            expanded: Expanded | None = None
            if plan.expand is not None and checked.roots:
                if reranked.released:  # RFC 8.2.4: the expansion reads in a new transaction
                    conn, again = held.enter_context(self.db.read(token))
                    served_by = served_by if again == served_by else "primary"
                expanded = self._expand(conn, plan, plan.expand, found, checked)
        selection = self._select(plan, checked, reranked.ranked)
        return RetrieveResult(
            records=[v for v, _ in checked.roots],
            neighbors=expanded.neighbors if expanded else [],
            edges=expanded.edges if expanded else [],
            diagnostics=self._diagnostics(plan, found, reranked, checked, expanded, served_by),
            selection=selection,
        )

    def _plan(self, req: RetrieveRequest, trust: TrustPolicy) -> Plan:
        """RFC 8.1-8.2.4: the caller's narrowed policy, the query's vector and tokens, the
        reranker, and the roots statement they ask for."""
        policy = trust.narrow(req.scopes, req.max_sensitivity)
        now = self.clock()
        query = req.query if req.query and req.query.strip() else None
        qvec, vector_state, qtokens = self._embed(query)
        asked = query is not None and _WORD.search(query) is not None
        cross, cross_state = self.reranker() if asked else (None, "off")
        expand = req.expand if req.expand is not None and req.expand.hops > 0 else None
        roots = self._roots_query(
            req,
            policy,
            now,
            query,
            qvec,
            tokens=qtokens is not None,
            reranked=cross is not None,
            expand=expand,
        )
        return Plan(req, policy, now, roots, expand, vector_state, qtokens, cross, cross_state)

    def _roots_query(
        self,
        req: RetrieveRequest,
        policy: TrustPolicy,
        now: datetime,
        query: str | None,
        qvec: list[float] | None,
        *,
        tokens: bool,
        reranked: bool,
        expand: ExpandOptions | None,
    ) -> retrieval.RootsQuery:
        """RFC 8.1-8.4: the roots statement of a request, with the query's ``tokens`` (late
        interaction) or not, for a cross-encoder (``reranked``) or not."""
        return retrieval.RootsQuery(
            filter=read_filter(req, policy, now, self.sealer),
            query=query,
            qvec=qvec,
            terms=query_terms(query),
            identifiers=query_identifiers(query),
            # RFC 8.1: the lexical and entity arms get a wider window than the limit; the vector
            # arm's cost under a selective filter grows with its window, so it gets the limit
            # (the same work as a bare top-k query)
            arm_k=arm_window(req.limit),
            vec_k=window(max(self.vector_k, req.limit)),
            fanout=self.entity_max_links,
            limit=self._pool(req.limit, tokens=tokens, reranked=reranked),
            max_bytes=req.max_bytes,
            rrf=self.fusion_method == "rrf",
            weights=self.weights,
            rrf_k=fusion.RRF_K,
            sd_floor_salience=fusion.SD_FLOOR["salience"],
            semantic_prior=fusion.SEMANTIC_PRIOR,
            when=when.windows(query),  # RFC 8.2.2
            when_prior=fusion.WHEN_PRIOR,
            late=tokens,
            adjacent=retrieval.Adjacent(fusion.ADJACENT_SOURCES, fusion.ADJACENT_REACH, fusion.ADJACENT_DECAY)
            if self.adjacent and query is not None
            else None,
            target_visible=self._full(policy),
            # RFC 8.4: the statement's first hop runs from its roots, which the re-ranking
            # changes; the expansion then makes its own
            first_hop=retrieval.FirstHop(expand.max_edges, expand.max_nodes)
            if expand is not None and not tokens and not reranked
            else None,
        )

    def _pool(self, limit: int, *, tokens: bool, reranked: bool) -> int:
        """RFC 8.2.3, 8.2.4: with the query's tokens or a reranker, the statement returns the
        best rows of the same fused ranking (a pool), re-ranked and cut to ``limit`` later."""
        pool = limit
        if tokens:
            pool = max(pool, late.POOL)
        if reranked:
            pool = max(pool, self.rerank_pool)
        return pool

    @staticmethod
    def _run(conn: Connection, plan: Plan) -> retrieval.Roots:
        """RFC 8.1-8.3: the roots statement, with iterative scans sized to its vector window."""
        retrieval.configure_scan(conn, ef_search=max(40, plan.roots.vec_k), max_scan_tuples=20_000)
        return retrieval.roots(conn, plan.roots)

    def _rerank(self, plan: Plan, found: retrieval.Roots, held: contextlib.ExitStack) -> Reranked:
        """RFC 8.2.3, 8.2.4: the pool re-ranked by late interaction, then by the cross-encoder,
        cut to the limit; the fused order where neither runs."""
        ranked, late_state, cross_state = found.ranked, "off", plan.cross_state
        cross, query, limit = plan.cross, plan.roots.query, plan.req.limit
        if plan.qtokens is not None:
            ranked, late_state = self._late(found, plan.qtokens, limit if cross is None else plan.roots.limit)
        if cross is not None and query is not None:
            # RFC 8.2.4: the model runs after the statement's transaction has ended, so
            # that no pooled connection waits on it; an expansion reads in a new one
            held.close()
            ranked, cross_state = self._cross(cross, ranked, query, limit)
            return Reranked(ranked, late_state, cross_state, released=True)
        return Reranked(ranked, late_state, cross_state, released=False)

    def _check(self, plan: Plan, ranked: list[retrieval.Ranked]) -> Checked:
        """RFC 8.3, 7.3: refuse a best candidate over the byte budget; re-check the rest."""
        req = plan.req
        if ranked and not ranked[0].fits:
            raise errors.RecordTooLarge(
                f"the best candidate needs {ranked[0].bytes} bytes, over max_bytes={req.max_bytes}",
                details=[
                    {
                        "field": "max_bytes",
                        "message": "a single record exceeds the budget",
                        "type": "record_too_large",
                    }
                ],
            )
        return self._roots(req, plan.policy, ranked, plan.now)

    def _expand(
        self, conn: Connection, plan: Plan, opts: ExpandOptions, found: retrieval.Roots, checked: Checked
    ) -> Expanded:
        """RFC 8.4, 8.3: the graph around the roots within the bytes they left, and the edges
        between the records returned."""
        req, policy, f = plan.req, plan.policy, plan.roots.filter
        expansion = graph.expand(
            conn,
            f,
            policy,
            [(v.id, self._vis(v)) for v, _ in checked.roots],
            opts,
            budget=max(0, req.max_bytes - checked.used),
            target_visible=self._full(policy),
            first_hop=self._first_hop(found),
        )
        neighbors, used = self._neighbors(conn, req, policy, f, expansion, checked.used, plan.now)
        kept = {v.id for v, _ in checked.roots} | {v.id for v in neighbors}
        edges = [
            Edge(source_id=s, predicate=p, target_id=t)
            for s, p, t in expansion.edges
            if s in kept and t in kept
        ]
        return Expanded(expansion, neighbors, edges, used)

    def _select(self, plan: Plan, checked: Checked, ranked: list[retrieval.Ranked]) -> Selection | None:
        """RFC 8.5: the selector's choice among the active competence and plan-graph roots
        shown in full."""
        return selector.select(
            [
                rec.record()
                for v, rec in checked.roots
                if rec is not None
                and not v.redacted
                and v.status is RevisionStatus.ACTIVE
                and rec.type in selector.SELECTABLE
            ],
            {r.record.id: r.vector_score for r in ranked if r.record is not None},
            plan.now,
            threshold=self.selector_threshold,
        )

    def _diagnostics(
        self,
        plan: Plan,
        found: retrieval.Roots,
        reranked: Reranked,
        checked: Checked,
        expanded: Expanded | None,
        served_by: ServedBy,
    ) -> RetrieveDiagnostics:
        """RFC 8.6: what the retrieval read, which ranking ran and which bound cut it."""
        req, query = plan.req, plan.roots.query
        return RetrieveDiagnostics(
            candidates=found.candidates,
            arms=ArmCounts(
                vector=found.arms["vector"],
                text=found.arms["text"],
                entity=found.arms["entity"],
                salience=found.candidates if query is None else 0,
            ),
            vector=plan.vector_state,
            fusion=self.fusion_method,
            late_interaction=reranked.late_state,
            reranker=reranked.cross_state,
            dates=[DateWindow(start=a.isoformat(), end=b.isoformat()) for a, b in plan.roots.when],
            returned=len(checked.roots),
            neighbors=len(expanded.neighbors) if expanded else 0,
            edges=len(expanded.edges) if expanded else 0,
            bytes=expanded.used if expanded else checked.used,
            row_limit=req.limit,
            max_bytes=req.max_bytes,
            row_limit_applied=found.candidates > req.limit,
            byte_limit_applied=any(not r.fits for r in reranked.ranked) or checked.cut,
            filtered_in_python=checked.dropped,
            served_by=served_by,
            expansion=expanded.expansion.diagnostics() if expanded else None,
        )

    def _late(self, found: retrieval.Roots, qtokens: Any, limit: int) -> tuple[list[retrieval.Ranked], str]:
        """RFC 8.2.3: the pool rows that fit the byte budget re-ranked by late interaction
        within their partitions (active above contested), the rest after them, cut to
        ``limit``. The state says whether any of them had tokens."""
        pool = dict(zip(found.pool_ids, found.ranked, strict=True))
        fitting = {rid: r for rid, r in pool.items() if r.fits and r.record is not None}
        rest = [r for rid, r in pool.items() if rid not in fitting]
        scores = {rid: r.score for rid, r in fitting.items()}
        state = "no_tokens"
        if found.signs:  # the statement gives signs only for rows that fit
            state = "used"
            scores = late.rerank(scores, late.scores_of(qtokens, found.signs, self.db.embedding_dim))
        # a stable sort: equal scores keep the fused order
        order = sorted(fitting, key=lambda rid: (fitting[rid].status != "active", -scores[rid]))
        moved = [(fitting[rid], scores[rid]) for rid in order] + [(r, r.score) for r in rest]
        kept = enumerate(moved[:limit], start=1)
        return [dataclasses.replace(r, score=score, ord=i) for i, (r, score) in kept], state

    def _cross(
        self, reranker: Reranker, ranked: list[retrieval.Ranked], query: str, limit: int
    ) -> tuple[list[retrieval.Ranked], str]:
        """RFC 8.2.4: the best ``rerank_pool`` rows that fit, re-ranked by their cross-encoder
        z-score beside their fused one (active above contested), the rest after them in their
        order, cut to ``limit``. A sealed record is not read: it counts a z-score of 0. The
        state says whether the model scored any; if it fails, the order stays as it was."""
        head = [r for r in ranked[: self.rerank_pool] if r.fits and r.record is not None]
        scores = {r.record.id: r.score for r in head if r.record is not None}
        texts = {rid: t for rid, t in ((r.record.id, _text(r.record)) for r in head if r.record) if t}
        state = "no_text"
        if texts:
            model: list[float] | None = None
            try:
                model = reranker.score(query, list(texts.values()))
                if len(model) != len(texts):
                    raise ProviderError(f"{len(model)} scores for {len(texts)} texts")
                if not all(math.isfinite(v) for v in model):
                    raise ProviderError("a score that is not a finite number")
            except Exception as exc:  # a reranker never fails a retrieve (RFC 8.2.4)
                log.warning("the reranker failed; results keep the fused order", extra={"error": str(exc)})
                model, state = None, "provider_error"
            if model is not None:
                state = "used"
                scores = late.rerank(scores, dict(zip(texts, model, strict=True)), weight=self.rerank_weight)
        moved = sorted(head, key=lambda r: (r.status != "active", -scores[r.record.id] if r.record else 0.0))
        taken = {id(r) for r in head}
        order = [(r, scores[r.record.id]) for r in moved if r.record is not None]
        order += [(r, r.score) for r in ranked if id(r) not in taken]
        kept = enumerate(order[:limit], start=1)
        return [dataclasses.replace(r, score=score, ord=i) for i, (r, score) in kept], state

    @staticmethod
    def _first_hop(found: retrieval.Roots) -> tuple[list[uuid.UUID], retrieval.Hop] | None:
        """RFC 8.4: the first hop the roots statement ran, with the roots it ran from (every
        root that fit); the expansion uses it only if it keeps exactly those roots."""
        if found.first_hop is None:
            return None
        return [r.record.id for r in found.ranked if r.fits and r.record is not None], found.first_hop

    @staticmethod
    def _full(policy: TrustPolicy) -> Callable[[str, str], bool]:
        """RFC 2.5: a relation target is shown only when the caller sees it in full."""
        return lambda scope, sens: policy.visibility(scope, Sensitivity(sens)) == "full"

    @staticmethod
    def _vis(v: RecordView) -> Visibility:
        return "redacted" if v.redacted else "full"

    def _roots(
        self,
        req: RetrieveRequest,
        policy: TrustPolicy,
        ranked: list[retrieval.Ranked],
        now: datetime,
    ) -> Checked:
        """RFC 7.3, 8.3: re-check trust, status and time on hydrated rows; re-measure bytes."""
        out: list[tuple[RecordView, retrieval.Stored | None]] = []
        used = dropped = 0
        for r in ranked:
            rec = r.record
            if not r.fits or rec is None:
                continue
            checked = self._checked(rec, r.status, req, policy, now, score=round(r.score, 6))
            if checked is None:
                dropped += 1
                continue
            v, rec = checked
            size = len(v.model_dump_json())
            if used + size > req.max_bytes:
                if not out:
                    raise errors.RecordTooLarge(
                        f"the best candidate is {size} bytes, over max_bytes={req.max_bytes}",
                        details=[
                            {
                                "field": "max_bytes",
                                "type": "record_too_large",
                                "message": "a single record exceeds the budget",
                            }
                        ],
                    )
                return Checked(out, used, dropped, cut=True)
            used += size
            out.append((v, None if v.redacted else rec))
        return Checked(out, used, dropped, cut=False)

    def _checked(
        self,
        rec: retrieval.Stored,
        sql_status: str,
        req: RetrieveRequest,
        policy: TrustPolicy,
        now: datetime,
        score: float | None = None,
    ) -> tuple[RecordView, retrieval.Stored] | None:
        """RFC 7.3, 5.6, 5.1: the caller's view of a hydrated row, its trust, time and status
        checked again in Python, with the row it was built from; ``None`` when any check
        refuses it. A sealed row is opened only then, and only for a view in full: a redacted
        view shows nothing it holds (RFC 7.6)."""
        visibility = policy.visibility(rec.scope, Sensitivity(rec.sensitivity))
        status = status_as_of(rec.status, rec.retracted_at, sql_status, req.as_of)
        if (
            visibility == "hidden"
            or not in_time(
                rec.recorded_at,
                rec.valid_from,
                rec.valid_to,
                req,
            )
            or not graph.status_allowed(
                status,
                include_retracted=req.include_retracted,
                include_contested=req.include_contested,
                include_proposed=req.include_proposed,
            )
        ):
            return None
        redacted = visibility == "redacted"
        if not redacted:
            rec = rec.opened(self.sealer)
        return rec.view(salience=rec.salience_at(now), status=status, redacted=redacted, score=score), rec

    @staticmethod
    def _view(rec: MemoryRecord, visibility: Visibility, status: str, now: datetime) -> RecordView:
        v = view(rec, salience=current_salience(rec, now), redacted=visibility == "redacted")
        if status != v.status.value:
            v = v.model_copy(update={"status": RevisionStatus(status)})
        return v

    def _neighbors(
        self,
        conn: Any,
        req: RetrieveRequest,
        policy: TrustPolicy,
        f: retrieval.ReadFilter,
        exp: graph.Expansion,
        used: int,
        now: datetime,
    ) -> tuple[list[RecordView], int]:
        """RFC 8.4, 8.3: neighbours in discovery order within the remaining byte budget.

        The hops hydrated the neighbours they found (within the same projected budget); any
        the running projected bytes admit but a hop did not hydrate are hydrated here.
        """
        if not exp.neighbors:
            return [], used
        status = {nid: st for nid, _, st in exp.neighbors}
        budget, running, fitting = max(0, req.max_bytes - used), 0, []
        for nid, _, _ in exp.neighbors:
            running += exp.bytes[nid]
            if running > budget:
                exp.node_limit_applied = True
                break
            fitting.append(nid)
        missing = [nid for nid in fitting if nid not in exp.records]
        if missing:
            for s in retrieval.bounded_hydrate(
                conn, missing, limit=len(missing), max_bytes=budget, f=f, target_visible=self._full(policy)
            ):
                if s.record is not None:
                    exp.records[s.record.id] = s.record
        out: list[RecordView] = []
        for rec in (exp.records.get(nid) for nid in fitting):
            if rec is None:  # gone since the hop
                break
            checked = self._checked(rec, status[rec.id], req, policy, now)
            if checked is None:
                exp.filtered_in_python += 1
                continue
            v = checked[0]
            size = len(v.model_dump_json())
            if used + size > req.max_bytes:
                exp.node_limit_applied = True
                break
            used += size
            out.append(v)
        return out, used

    def _with_visible_relations(
        self, conn: Any, policy: TrustPolicy, views: list[RecordView]
    ) -> list[RecordView]:
        """RFC 2.5: relations to records the caller cannot fully see are omitted."""
        targets = sorted({r.target_id for v in views for r in v.relations})
        if not targets:
            return views
        visible = {
            tid
            for tid, a in retrieval.access(conn, targets).items()
            if policy.visibility(a.scope, a.sensitivity) == "full"
        }
        out = []
        for v in views:
            kept = [r for r in v.relations if r.target_id in visible]
            out.append(
                v
                if len(kept) == len(v.relations)
                else v.model_copy(
                    update={
                        "relations": kept,
                        "payload": shown_references(v.payload, ((r.predicate, r.target_id) for r in kept)),
                    }
                )
            )
        return out

    def get(
        self,
        record_id: uuid.UUID,
        trust: TrustPolicy,
        *,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> RecordView:
        """RFC 5.1, 5.6, 7.3: one record by id, status shown, redacted or hidden per trust.

        Reads the primary so that a client reads its own writes (RFC 13.2). ``as_of``
        answers with the record as the memory believed it then (404 if it was not yet
        recorded; its status at that moment); ``valid_at`` answers 404 unless the record
        was valid then. A sealed record is opened after the trust check, for a view in full
        only (RFC 7.6).
        """
        missing = errors.NotFound(f"record {record_id} not found")
        with self.db.transaction() as conn:
            acc = retrieval.access(conn, [record_id], as_of=as_of).get(record_id)
            if acc is None or trust.visibility(acc.scope, acc.sensitivity) == "hidden":
                raise missing
            row = records.hydrate_rows(conn, [record_id], as_of=as_of).get(record_id)
            if row is None:
                raise missing
            visibility = trust.visibility(row["scope"], Sensitivity(row["sensitivity"]))
            probe = RetrieveRequest(as_of=as_of, valid_at=valid_at)
            stored = retrieval.Stored.of(row)
            if visibility == "hidden" or not in_time(
                stored.recorded_at, stored.valid_from, stored.valid_to, probe
            ):
                raise missing
            status = stored.status
            if as_of is not None:
                status = status_as_of(status, stored.retracted_at, acc.status.value, as_of)
            now = self.clock()
            if visibility == "redacted":
                return stored.view(salience=stored.salience_at(now), status=status, redacted=True)
            rec = records.row_to_record(self.sealer.open_row(row))
            v = self._view(rec, visibility, status, now)
            return self._with_visible_relations(conn, trust, [v])[0]
