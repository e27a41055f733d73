"""Celery beat's schedule: the batch triggers, intervals from settings (RFC 9.5, 6.5).

Beat only triggers; every entry is a bounded batch keyed off the ``work_items`` or
``operations`` table. Each message expires after one interval, so a backlog of
ticks does not pile up while workers are down.
"""

from __future__ import annotations

from typing import Any

from membrane_core.enums import Job
from membrane_core.settings import Settings


def build(settings: Settings) -> dict[str, dict[str, Any]]:
    """RFC 9.5: ``{entry name: {task, schedule, kwargs, options}}`` for ``beat_schedule``."""
    s = settings
    entries: list[tuple[str, str, float, dict[str, Any]]] = [
        ("redispatch-stale-operations", "membrane.redispatch", s.beat_redispatch_seconds, {}),
        ("reap-expired-claims", "membrane.reap", s.beat_reap_seconds, {}),
        ("purge-finished-operations", "membrane.purge_operations", s.beat_purge_operations_seconds, {}),
        ("review-expiry", "membrane.review_expiry", s.beat_review_seconds, {}),
        ("maintenance-decay", "membrane.maintenance_job", s.beat_decay_seconds, {"job": Job.DECAY.value}),
        ("maintenance-prune", "membrane.maintenance_job", s.beat_prune_seconds, {"job": Job.PRUNE.value}),
        (
            "maintenance-consolidate",
            "membrane.maintenance_job",
            s.beat_consolidate_seconds,
            {"job": Job.CONSOLIDATE.value},
        ),
    ]
    if s.encryption_keys is not None:  # RFC 7.6: rotation's seal items
        entries.append(
            ("maintenance-seal", "membrane.maintenance_job", s.beat_seal_seconds, {"job": Job.SEAL.value})
        )
    if s.embedding_provider != "none":
        entries.append(("embedding-batch", "membrane.embed_batch", s.beat_embed_seconds, {}))
    if s.llm_provider != "none":
        entries.append(("extraction-batch", "membrane.extract_batch", s.beat_extract_seconds, {}))
    return {
        name: {
            "task": task,
            "schedule": float(every),
            "kwargs": kwargs,
            "options": {"expires": max(1.0, float(every))},
        }
        for name, task, every, kwargs in entries
        if every > 0
    }


__all__ = ["build"]
