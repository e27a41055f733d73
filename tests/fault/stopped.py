"""A hung service: its process stopped with SIGSTOP, its sockets open, answering nothing."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """``pid`` stopped for the block and continued after it, whatever the block raised.

    The kernel still accepts connections on its listening sockets (into the backlog), so
    a client connects and then waits for an answer that never comes: a hang, not a refusal.
    """
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def postmaster_pid(pg_dir: Path) -> int:
    """The postmaster's pid: the first line of ``postmaster.pid`` in the server's data folder."""
    return int((pg_dir / "postmaster.pid").read_text().splitlines()[0])
