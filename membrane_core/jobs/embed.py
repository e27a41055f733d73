"""The embedding pool's batch: claim ``embed`` items, compute vectors, write them (RFC 12.1, 9.4).

Capture never waits for this: it only schedules an ``embed`` work item (RFC 3.3).
A batch claims due items under a lease and commits the claim, calls the provider
outside any transaction, then writes every vector in one statement and completes
the items it still holds in one transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from membrane_core import providers
from membrane_core.clock import Clock
from membrane_core.enums import WorkKind
from membrane_core.providers.base import EmbeddingProvider, ProviderError, unit
from membrane_core.settings import Settings
from membrane_core.storage import db as storage_db
from membrane_core.storage import derived
from membrane_core.storage import workqueue as wq

log = logging.getLogger(__name__)



def retry_at(now: datetime, attempts: int) -> datetime:
    """RFC 9.4: exponential backoff for a failed work item (5 s doubling, at most 1 h)."""
    return now + timedelta(seconds=min(3600, 5 * 2 ** max(0, attempts - 1)))


def fail_items(
    db: storage_db.Database, items: Sequence[wq.WorkItem], error: str, *, owner: str,
    now: datetime,
) -> dict[str, int]:
    """RFC 9.4: reschedule failed items with backoff; bury those out of attempts."""
    dead = [(it.id, error) for it in items if it.attempts >= wq.MAX_ATTEMPTS]
    again = [(it.id, retry_at(now, it.attempts), error) for it in items
             if it.attempts < wq.MAX_ATTEMPTS]
    with db.transaction() as conn:
        wq.reschedule(conn, again, owner=owner)
        wq.bury(conn, dead, owner=owner)
    return {"rescheduled": len(again), "dead": len(dead)}


class EmbeddingService:
    """``Membrane.embedding``: batches of embeddings from the configured provider (RFC 12.1)."""

    def __init__(
        self, db: storage_db.Database, provider_factory: Callable[[], EmbeddingProvider | None],
        *, clock: Clock, batch_size: int = 500, lease_seconds: int = 300,
        owner: Callable[[], str] | None = None,
    ) -> None:
        self._db = db
        self._factory = provider_factory
        self._provider: EmbeddingProvider | None = None
        self._built = False
        self._clock = clock
        self._batch_size = batch_size
        self._lease = lease_seconds
        self._owner = owner

    @classmethod
    def from_settings(cls, settings: Settings, db: storage_db.Database, *, clock: Clock
                      ) -> EmbeddingService:
        """RFC 12.1: the provider named by the settings, built on first use (not at import)."""
        def factory() -> EmbeddingProvider | None:
            key = settings.embedding_api_key
            return providers.build_embedding_provider(
                settings.embedding_provider, dim=settings.embedding_dim,
                base_url=settings.embedding_base_url, model=settings.embedding_model,
                api_key=key.get_secret_value() if key else None,
            )
        return cls(db, factory, clock=clock, batch_size=settings.batch_size,
                   lease_seconds=settings.claim_seconds)

    @property
    def provider(self) -> EmbeddingProvider | None:
        """The provider, built once per process (RFC 12.1)."""
        if not self._built:
            provider = self._factory()
            if provider is not None and provider.dim != self._db.embedding_dim:
                raise ValueError(f"the embedding provider gives {provider.dim} dimensions; "
                                 f"the schema stores {self._db.embedding_dim}")
            self._provider, self._built = provider, True
        return self._provider

    def _who(self) -> str:
        if self._owner is not None:
            return self._owner()
        return wq.worker_name()

    def run_batch(self, limit: int | None = None) -> dict[str, Any]:
        """RFC 12.1, 9.4: embed up to ``limit`` due records; returns a summary.

        Without a provider nothing is claimed (the items wait for one). Provider errors
        reschedule the batch with backoff; items are buried after ``MAX_ATTEMPTS``.
        """
        summary: dict[str, Any] = {"job": "embed", "claimed": 0, "embedded": 0, "missing": 0}
        provider = self.provider
        if provider is None:
            return {**summary, "provider": "none"}
        owner, now = self._who(), self._clock()
        with self._db.transaction() as conn:
            items = wq.claim(conn, WorkKind.EMBED, owner=owner, limit=limit or self._batch_size,
                             now=now, lease_seconds=self._lease)
        summary.update(provider=provider.name, claimed=len(items))
        if not items:
            return summary
        with self._db.transaction() as conn:
            found = derived.texts(conn, [it.target_id for it in items])
        targets = list(dict.fromkeys(it.target_id for it in items if it.target_id in found))
        try:
            vectors = provider.embed([found[t] for t in targets]) if targets else []
            bad = [len(v) for v in vectors if len(v) != self._db.embedding_dim]
            if len(vectors) != len(targets) or bad:
                raise ProviderError(f"provider returned {len(vectors)} vectors for {len(targets)} "
                                    f"texts, dimensions {sorted(set(bad))[:3]}")
        except ProviderError as exc:
            log.warning("embedding batch failed: %s", exc)
            return {**summary, "error": str(exc),
                    **fail_items(self._db, items, str(exc), owner=owner, now=self._clock())}
        # RFC 12.4: vectors are stored at length 1; one without a direction (zero, NaN,
        # infinite) is not stored and does not fail the batch: the record stays findable by
        # its text and entities; the provider would answer the same again, so the item completes
        units = {t: unit(v) for t, v in zip(targets, vectors, strict=True)}
        degenerate = [t for t, u in units.items() if u is None]
        if degenerate:
            log.warning("embedding provider returned %d vectors without a direction; not stored",
                        len(degenerate), extra={"record_ids": [str(t) for t in degenerate[:10]]})
        with self._db.transaction() as conn:
            held = derived.hold(conn, [it.id for it in items], owner=owner)
            keep = set(held.values())
            written = derived.write_embeddings(
                conn, {t: u for t, u in units.items() if u is not None and t in keep},
                model=f"{provider.name}:{provider.model}", now=self._clock(),
            )
            wq.complete(conn, list(held), owner=owner)
        summary.update(embedded=written, missing=len(items) - len(targets),
                       lost=len(items) - len(held), degenerate=len(degenerate))
        return summary
