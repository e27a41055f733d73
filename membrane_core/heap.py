"""The collector's settings of a long-running process (RFC 13.1)."""

from __future__ import annotations

import gc

#: RFC 13.1: allocations between young-generation collections, and the young and middle
#: collections between the next generation's. A capture batch keeps about a hundred
#: thousand objects alive while it is planned and written: at Python's defaults (700, 10,
#: 10) the collector walked them again and again.
THRESHOLDS = (10_000, 50, 100)


def freeze_heap() -> None:
    """RFC 13.1: once a process has built what it serves with (modules, schemas, the app or
    the Membrane, the pools), collect once and move every survivor out of the collector's
    reach, then collect the young generation less often: a collection walks only what the
    work in hand keeps."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
