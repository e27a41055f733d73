"""Every ``RFC n.m`` cited in the code names a section that exists in rfc.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\b", re.MULTILINE)
CITATION = re.compile(r"RFC (\d+(?:\.\d+)*)")
SOURCES = ["membrane_core", "api", "workers", "membrane_cli", "beat_schedule.py"]


def sections() -> set[str]:
    text = (ROOT / "rfc.md").read_text(encoding="utf-8")
    found = set(HEADING.findall(text))
    # list items "- 2.2.1 episodic:" define sub-sections too
    found |= set(re.findall(r"^- (\d+\.\d+\.\d+) ", text, re.MULTILINE))
    return found


def citations() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in SOURCES:
        base = ROOT / name
        files = [base] if base.is_file() else sorted(base.rglob("*")) if base.exists() else []
        for path in files:
            if path.suffix not in {".py", ".sql"}:
                continue
            for cited in CITATION.findall(path.read_text(encoding="utf-8")):
                out.setdefault(cited, []).append(str(path.relative_to(ROOT)))
    return out


def test_every_cited_section_exists() -> None:
    known = sections()
    cited = citations()
    assert len(cited) > 20, "positive control: the code cites the RFC"
    missing = {c: sorted(set(p)) for c, p in cited.items() if c not in known}
    assert not missing, f"cited sections missing from rfc.md: {missing}"


def test_checker_catches_a_missing_section() -> None:
    assert "99.9" not in sections()  # negative control for the checker itself
