"""This process's settings, read from the environment once (RFC 9.5).

A worker pool's main process reads them when it loads the app; each pool process reads
them again once, at its start (``worker_process_init``), and every module of the package
(the app, its logging, metrics and tracing, Flower's command) takes them from here, so a
process never reads two different environments.
"""

from __future__ import annotations

import os
from typing import Any

from celery.signals import worker_process_init

from membrane_core import Settings

#: The settings this process read, by its pid: a forked child never uses its parent's.
_read: dict[int, Settings] = {}


def settings() -> Settings:
    """This process's settings, read on first use."""
    pid = os.getpid()
    s = _read.get(pid)
    if s is None:
        _read.clear()
        s = _read[pid] = Settings()
    return s


def forget() -> None:
    """Read the environment again at the next :func:`settings` (a pool process's start)."""
    _read.clear()


# Connected when this module is first imported, so before the receivers of the modules that
# import it: a pool process starts from its own environment. Celery's signal decorators are
# untyped to mypy.
@worker_process_init.connect  # type: ignore[untyped-decorator]
def _pool_process_starts(**_: Any) -> None:
    forget()
