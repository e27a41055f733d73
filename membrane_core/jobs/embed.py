"""The embed job: compute vectors for new records and store them (RFC 12.1, 9.4).

Capture never waits for this: it only schedules an ``embed`` work item (RFC 3.3). The
batch runner claims due items under a lease; the handler reads their texts and calls
the provider outside any transaction, then writes every vector in one statement in the
transaction that completes the items still held.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from membrane_core import errors, providers
from membrane_core.clock import Clock
from membrane_core.enums import WorkKind
from membrane_core.jobs.runner import BatchRunner, Outcome
from membrane_core.providers.base import EmbeddingProvider, ProviderError, token_embedder, unit
from membrane_core.retrieval import late
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.settings import Settings
from membrane_core.storage import derived
from membrane_core.storage.db import Connection, Database
from membrane_core.storage.workqueue import WorkItem, WorkQueue, enqueue_in_chunks, worker_name

log = logging.getLogger(__name__)


#: RFC 12.5: records read per transaction while writing the items of embedding again.
ENQUEUE_CHUNK = 5000


def model_id(provider: EmbeddingProvider) -> str:
    """The model a stored vector names (``record_embeddings.model``): ``<provider>:<model>``."""
    return f"{provider.name}:{provider.model}"


@dataclass(frozen=True)
class Vectors:
    """A batch's vectors by record, and the records that get none: no text, no direction, or
    sealed from a provider that may not read them."""

    units: dict[uuid.UUID, list[float]]
    missing: frozenset[uuid.UUID]
    degenerate: frozenset[uuid.UUID]
    withheld: frozenset[uuid.UUID] = frozenset()
    #: RFC 7.6: sealed records whose key the ring lacks, with the error naming it
    unopened: dict[uuid.UUID, str] = field(default_factory=dict)
    #: RFC 8.2.3: token signs of the records with a vector, from a provider that gives tokens
    signs: dict[uuid.UUID, bytes] = field(default_factory=dict)


class EmbedHandler:
    """RFC 12.1: the vectors of a batch's records from one provider call.

    A sealed record is opened for a provider that runs in the process, or for an external
    one when ``sealed_externally`` allows it; otherwise it gets no vector (RFC 7.6).
    """

    kind = WorkKind.EMBED

    def __init__(
        self,
        db: Database,
        provider: EmbeddingProvider,
        *,
        sealer: Sealer = NO_KEYS,
        sealed_externally: bool = False,
    ) -> None:
        self._db = db
        self._provider = provider
        self._sealer = sealer
        self._open_sealed = sealed_externally or not providers.is_external(provider.name)

    def prepare(self, items: Sequence[WorkItem]) -> Vectors:
        """Read the records' texts and embed them; ``ProviderError`` fails the batch."""
        with self._db.transaction() as conn:
            read = derived.texts(
                conn, [it.target_id for it in items], self._sealer, open_sealed=self._open_sealed
            )
        found, withheld = read.texts, read.withheld
        targets = list(dict.fromkeys(it.target_id for it in items if it.target_id in found))
        tokens = token_embedder(self._provider)
        texts = [found[t] for t in targets]
        signs: dict[uuid.UUID, bytes] = {}
        if not targets:
            vectors: list[list[float]] = []
        elif tokens is None:
            vectors = self._provider.embed(texts)
        else:
            # RFC 8.2.3: the tokens come from the same run; a sealed record keeps none
            vectors, toks = tokens.embed_tokens(texts)
            if len(toks) != len(targets):
                raise ProviderError(f"provider returned {len(toks)} token lists for {len(targets)} texts")
            signs = {t: late.pack(k) for t, k in zip(targets, toks, strict=True) if t not in read.opened}
        bad = [len(v) for v in vectors if len(v) != self._db.embedding_dim]
        if len(vectors) != len(targets) or bad:
            raise ProviderError(
                f"provider returned {len(vectors)} vectors for {len(targets)} "
                f"texts, dimensions {sorted(set(bad))[:3]}"
            )
        # RFC 12.4: vectors are stored at length 1; one without a direction (zero, NaN,
        # infinite) is not stored and does not fail the batch: the record stays findable by
        # its text and entities; the provider would answer the same again, so the item completes
        units = {t: unit(v) for t, v in zip(targets, vectors, strict=True)}
        degenerate = [t for t, u in units.items() if u is None]
        if degenerate:
            log.warning(
                "embedding provider returned %d vectors without a direction; not stored",
                len(degenerate),
                extra={"record_ids": [str(t) for t in degenerate[:10]]},
            )
        return Vectors(
            units={t: u for t, u in units.items() if u is not None},
            signs={t: b for t, b in signs.items() if b and units.get(t) is not None},
            missing=frozenset(
                it.target_id
                for it in items
                if it.target_id not in found
                and it.target_id not in withheld
                and it.target_id not in read.unopened
            ),
            degenerate=frozenset(degenerate),
            withheld=frozenset(withheld),
            unopened=read.unopened,
        )

    def apply(
        self, conn: Connection, held: dict[int, uuid.UUID], prepared: Vectors, now: datetime
    ) -> Outcome:
        """Write the held records' vectors and complete their items; a record whose key the
        ring lacks fails the batch, which the runner then applies item by item (RFC 9.4), so
        that item alone fails, naming the key (RFC 7.6)."""
        keep = set(held.values())
        unopened = [t for t in sorted(keep) if t in prepared.unopened]
        if unopened:
            raise errors.EncryptionKeyUnavailable(prepared.unopened[unopened[0]])
        written = derived.write_embeddings(
            conn,
            {t: u for t, u in prepared.units.items() if t in keep},
            model=model_id(self._provider),
            now=now,
            signs=prepared.signs,
        )
        out = Outcome(done=list(held))
        # counted over the held items, so that the item-by-item retry does not count twice
        out.stats.update(
            embedded=written,
            missing=sum(t in prepared.missing for t in keep),
            degenerate=sum(t in prepared.degenerate for t in keep),
        )
        if prepared.withheld:
            out.stats.update(sealed_withheld=sum(t in prepared.withheld for t in keep))
        return out


class EmbeddingService:
    """``Membrane.embedding``: batches of embeddings from the configured provider (RFC 12.1)."""

    def __init__(
        self,
        db: Database,
        provider_factory: Callable[[], EmbeddingProvider | None],
        *,
        clock: Clock,
        batch_size: int = 500,
        lease_seconds: int = 300,
        owner: Callable[[], str] = worker_name,
        sealer: Sealer = NO_KEYS,
        sealed_externally: bool = False,
        query_factory: Callable[[], EmbeddingProvider | None] | None = None,
    ) -> None:
        self._db = db
        self._sealer = sealer
        self._sealed_externally = sealed_externally
        self._factory = provider_factory
        self._provider: EmbeddingProvider | None = None
        self._built = False
        #: RFC 12.4: the query embedder's own build (its thread cap), else the pool's provider
        self._query_factory = query_factory
        self._query: EmbeddingProvider | None = None
        self._query_built = False
        self._batch_size = batch_size
        self._clock = clock
        self._runner = BatchRunner(WorkQueue(db), clock=clock, owner=owner, lease_seconds=lease_seconds)

    @classmethod
    def from_settings(
        cls, settings: Settings, db: Database, *, clock: Clock, sealer: Sealer = NO_KEYS
    ) -> EmbeddingService:
        """RFC 12.1: the provider named by the settings, built on first use (not at import)."""

        def build(threads: int) -> EmbeddingProvider | None:
            key = settings.embedding_api_key
            return providers.build_embedding_provider(
                settings.embedding_provider,
                dim=settings.embedding_dim,
                base_url=settings.embedding_base_url,
                model=settings.embedding_model,
                api_key=key.get_secret_value() if key else None,
                cache_dir=settings.data_dir / "models",
                threads=threads,
            )

        pool, query = settings.embedding_pool_threads, settings.query_embedding_threads
        # RFC 12.4: the local model runs once per role only where the roles' threads differ
        split = settings.embedding_provider == "local" and pool != query
        return cls(
            db,
            lambda: build(pool),
            query_factory=(lambda: build(query)) if split else None,
            clock=clock,
            batch_size=settings.batch_size,
            lease_seconds=settings.claim_seconds,
            sealer=sealer,
            sealed_externally=settings.embed_encrypted_externally,
        )

    @property
    def provider(self) -> EmbeddingProvider | None:
        """The provider, built once per process (RFC 12.1)."""
        if not self._built:
            provider = self._factory()
            if provider is not None and provider.dim != self._db.embedding_dim:
                raise ValueError(
                    f"the embedding provider gives {provider.dim} dimensions; "
                    f"the schema stores {self._db.embedding_dim}"
                )
            self._provider, self._built = provider, True
        return self._provider

    @property
    def query_provider(self) -> EmbeddingProvider | None:
        """RFC 12.4: the provider that embeds queries, built once per process with the query
        role's threads (the pool's provider when both roles run alike)."""
        if self._query_factory is None:
            return self.provider
        if not self._query_built:
            self._query, self._query_built = self._query_factory(), True
        return self._query

    def enqueue_stale(
        self,
        *,
        every: bool = False,
        scopes: Sequence[str] | None = None,
        chunk: int = ENQUEUE_CHUNK,
        on_chunk: Callable[[int, int], None] | None = None,
    ) -> int:
        """RFC 12.5: an ``embed`` item for every record with text whose vector is missing, of
        another model than the provider's, without the token signs the provider gives, or
        out of line though it fits in the row (``every``: for every record with text), in
        ``scopes`` when given; the store is read by id in chunks of one transaction each,
        ``on_chunk(records read, items written)`` after each. Returns the items written; 0
        without a provider."""
        provider = self.provider
        if provider is None:
            return 0
        model, tokens = model_id(provider), token_embedder(provider) is not None
        inline = derived.vector_fits_in_row(self._db.embedding_dim)

        def step(conn: Connection, after: uuid.UUID | None) -> tuple[uuid.UUID | None, int, int]:
            return derived.enqueue_stale(
                conn,
                model=model,
                tokens=tokens,
                inline=inline,
                every=every,
                scopes=scopes,
                after=after,
                limit=chunk,
                now=self._clock(),
            )

        return enqueue_in_chunks(self._db, step, chunk=chunk, on_chunk=on_chunk)

    def progress(self) -> dict[str, int]:
        """RFC 12.5: what embedding again has left, for the configured provider (without one,
        no vector is of another model and none lacks signs)."""
        provider = self.provider
        model = model_id(provider) if provider is not None else ""
        tokens = provider is not None and token_embedder(provider) is not None
        with self._db.transaction() as conn:
            out = derived.embedding_progress(
                conn, model=model, tokens=tokens, inline=derived.vector_fits_in_row(self._db.embedding_dim)
            )
        if provider is None:
            out["other_model"] = 0
        return out

    def run_batch(self, limit: int | None = None) -> dict[str, Any]:
        """RFC 12.1, 9.4: embed up to ``limit`` due records; returns a summary.

        Without a provider nothing is claimed (the items wait for one). Provider errors
        reschedule the batch with backoff; items are buried after ``MAX_ATTEMPTS``.
        """
        summary: dict[str, Any] = {"job": "embed", "claimed": 0, "embedded": 0, "missing": 0}
        provider = self.provider
        if provider is None:
            return {**summary, "provider": "none"}
        handler = EmbedHandler(
            self._db, provider, sealer=self._sealer, sealed_externally=self._sealed_externally
        )
        return {**summary, "provider": provider.name, **self._runner.run(handler, limit or self._batch_size)}
