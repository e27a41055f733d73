"""Benchmarks: commands that print figures beside a baseline, never timed tests (RFC 14.1)."""

from pathlib import Path


def write_markdown(path: Path, block: str, *, start: str, end: str, heading: str) -> None:
    """Replace the block between ``start`` and ``end`` in ``path``, or append it under ``heading``."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n" + block + "\n"
    path.write_text(text)
