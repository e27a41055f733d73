"""Child processes of the tests (Celery workers, beat, Flower, ``membrane run``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

#: The repository root: the working directory and ``PYTHONPATH`` of every child process.
ROOT = Path(__file__).resolve().parents[2]


class Proc:
    """A child process in its own session, so the whole group can be signalled."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.popen = subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text():
                return
            if self.popen.poll() is not None:
                raise RuntimeError(f"process exited ({self.popen.returncode}):\n{self.text()}")
            time.sleep(0.1)
        raise TimeoutError(f"{needle!r} not seen in {self.log}:\n{self.text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group (main process and pool children)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)
        self._out.close()

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
                return
        self._out.close()


#: The ``spawn`` fixture: ``spawn("worker", "ingest", concurrency=2)`` or ``spawn("beat")``.
Spawn = Callable[..., Proc]


def wait_until(check: Callable[[], bool], timeout: float = 90.0, what: str = "condition") -> None:
    """Poll ``check`` until it holds; TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what} not reached after {timeout}s")
