"""Benchmarks: commands that print figures beside a baseline, never timed tests (RFC 14.1)."""

import contextlib
import math
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membrane_core import Settings
from membrane_core.storage import embedded


def fresh_store(settings: Settings, data_dir: Path) -> Settings:
    """RFC 14.1: ``settings`` for a benchmark's own store in ``data_dir`` (embedded Postgres,
    a private Redis), whatever ``MEMBRANE_DATABASE_URL``, ``MEMBRANE_READ_DATABASE_URL`` and
    ``MEMBRANE_REDIS_URL`` name: a benchmark never writes into a configured deployment."""
    return settings.model_copy(
        update={"data_dir": data_dir, "database_url": None, "read_database_url": None, "redis_url": None}
    )


@contextlib.contextmanager
def temp_store(name: str, store: str = "") -> Iterator[Path]:
    """RFC 14.1: a benchmark's own temporary folder (``membrane-bench-<name>-*``). On leaving,
    the embedded Postgres of ``folder / store`` is stopped, since it outlives its process
    otherwise (RFC 11.2), and the folder is removed."""
    folder = Path(tempfile.mkdtemp(prefix=f"membrane-bench-{name}-"))
    try:
        yield folder
    finally:
        embedded.stop(folder / store)
        shutil.rmtree(folder, ignore_errors=True)


def progress(console: Console, width: int = 28) -> Progress:
    """The benchmarks' progress bars: a description ``width`` wide, the bar, done of total, time."""
    return Progress(
        TextColumn(f"{{task.description:<{width}}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def write_markdown(path: Path, block: str, *, start: str, end: str, heading: str) -> None:
    """Replace the block between ``start`` and ``end`` in ``path``, or append it under ``heading``."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n" + block + "\n"
    path.write_text(text)


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile of ``values`` (NaN for none)."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))] if s else float("nan")
