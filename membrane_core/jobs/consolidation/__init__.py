"""Consolidation: incremental stages fed by work items (RFC 6.4).

:mod:`mining` reads facts, tool signatures and plan graphs out of episodes (pure);
:mod:`stages` writes what they yield in the batch's transaction.
"""

from __future__ import annotations

from membrane_core.jobs.consolidation.stages import Context, consolidate

__all__ = ["Context", "consolidate"]
